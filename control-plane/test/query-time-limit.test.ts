import Fastify from 'fastify';
import { Types } from 'mongoose';
import { Messages } from '@xfer/shared';
import type { App } from '../src/app.js';
import { paginate } from '../src/lib/pagination.js';
import errorHandler from '../src/plugins/app/error-handler.js';
import { buildTestApp, expectError } from './helper.js';

/**
 * A list page the database cannot serve from an index (a substring search over many files on
 * FerretDB) is stopped by its time limit and answered 503 naming the cause, instead of holding
 * the request until the database socket times out and calling the database unavailable.
 */
let app: App;
const account = new Types.ObjectId();

beforeAll(async () => {
  app = await buildTestApp();
  const docs = Array.from({ length: 20_000 }, (_, i) => ({
    account_id: account, name: `file-${i}.txt`, name_lower: `file-${i}.txt`, path: '/', size: i, mime_type: 'text/plain',
    sha256: '0'.repeat(64), storage_key: `k${i}`, uploaded_by: { type: 'system', id: null }, created_at: new Date(), deleted_at: null,
  }));
  await app.db.files.insertMany(docs, { ordered: false, lean: true });
}, 120_000);
afterAll(() => app.close());

test('a page over its time limit is stopped by the database with MaxTimeMSExpired, and the API answers 503 saying so', async () => {
  const slow = paginate(app.db.files, { account_id: account, deleted_at: null, name_lower: { $regex: 'no-such-name' } }, {}, (d) => d, { maxTimeMs: 1 });
  const err = await slow.catch((e: unknown) => e as Error & { code?: number });
  expect(err).toMatchObject({ name: 'MongoServerError', code: 50 });

  const api = Fastify({ logger: false });
  await api.register(errorHandler);
  api.get('/slow', async () => { throw err; });
  expectError(await api.inject({ method: 'GET', url: '/slow' }), 503, Messages.queryTooSlow);
  await api.close();
});

test('the same page within its limit answers', async () => {
  const page = await paginate(app.db.files, { account_id: account, deleted_at: null, name_lower: { $regex: 'file-19999' } }, {}, (d) => d.name);
  expect(page.data).toEqual(['file-19999.txt']);
});

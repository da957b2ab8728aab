import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Messages } from '@xfer/shared';
import { buildApp, type App } from '../src/app.js';
import { parseConfig } from '../src/config.js';
import { defaultCacheDir, startEmbeddedMongo, type EmbeddedMongo } from '../src/db/index.js';
import { auth, createAccount, expectError } from './helper.js';
import { eventually } from './protocol-client.js';

/**
 * A database server of this test's own, stopped and started again on the same port while the
 * app keeps running: the API must answer 503 meanwhile and recover by itself.
 */
const dataDir = mkdtempSync(join(tmpdir(), 'xfer-outage-'));
let db: EmbeddedMongo;
let app: App;

beforeAll(async () => {
  db = await startEmbeddedMongo({ dataDir: join(dataDir, 'db'), cacheDir: defaultCacheDir(process.env), log: () => {} });
  const config = parseConfig({
    MONGODB_URI: db.uri, XFER_DATA_DIR: dataDir, XFER_MASTER_KEY: randomBytes(32).toString('base64'),
    XFER_DB_TIMEOUT_MS: '1000', XFER_LOG_LEVEL: 'silent',
  });
  app = await buildApp(config, { logger: false });
}, 120_000);

afterAll(async () => {
  await app?.close();
  await db?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

test('a stopped database makes the API answer 503 {error}, and it recovers without a restart', async () => {
  const owner = await createAccount(app);
  const list = () => app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth(owner.apiKey) });
  expect((await list()).statusCode).toBe(200);

  const port = Number(new URL(db.uri).port);
  await db.stop();

  expectError(await list(), 503, Messages.databaseUnavailable);
  expectError(await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: owner.email, password: owner.password } }), 503);
  const health = await app.inject({ method: 'GET', url: '/api/v1/health' });
  expect(health.statusCode).toBe(503);
  expect(health.json()).toMatchObject({ status: 'unavailable', checks: { database: 'down' } });

  db = await startEmbeddedMongo({ dataDir: join(dataDir, 'db'), cacheDir: defaultCacheDir(process.env), log: () => {}, port });
  // The driver reconnects by itself: a while on a loaded machine.
  await eventually(async () => (await list()).statusCode === 200, 'the API answers 200 again', 60_000);
  expect((await app.inject({ method: 'GET', url: '/api/v1/health' })).json()).toEqual({ status: 'ok' });
}, 120_000);

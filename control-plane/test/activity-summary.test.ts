import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, expectError, type TestAccount } from './helper.js';
import { eicar, testScanner, upload, uploaded } from './files-helper.js';
import { makeConnection, uniqueName } from './fixtures.js';

// GET /activity/summary: the dashboard counters of activity:read, counted from real uploads,
// downloads and scan-blocked uploads through the API, and from transfers in each state.

let app: App;
let a: TestAccount;
let b: TestAccount;
let connections: { source: string; destination: string };

const summary = (token: string, query = '') => app.inject({ method: 'GET', url: `/api/v1/activity/summary${query}`, headers: auth(token) });
const HOUR = 60 * 60 * 1000;

/** A transfer of account `a` in `status`, created at `at` (its `_id` made then too, as a real one would be). */
async function transfer(status: string, at: Date, extra: Record<string, unknown> = {}) {
  await app.db.transfers.create({
    _id: Types.ObjectId.createFromTime(Math.floor(at.getTime() / 1000)),
    account_id: a.accountId, name: uniqueName('job'),
    source_connection_id: connections.source, source_path: '/in', destination_connection_id: connections.destination, destination_path: '/out',
    options: { overwrite: 'if_changed', verify: 'checksum', concurrency: 8 },
    status, created_at: at, updated_at: at, ...extra,
  });
}

beforeAll(async () => {
  app = await buildTestApp({ scanner: testScanner() });
  a = await createAccount(app);
  b = await createAccount(app);
  connections = { source: (await makeConnection(app, a.apiKey, 'sftp')).id, destination: (await makeConnection(app, a.apiKey, 's3')).id };
});
afterAll(async () => {
  await app.close();
});

it('counts transfers by status, bytes, files and agents, uploads, downloads and blocked uploads of the window, for the caller\'s account only', async () => {
  const now = Date.now();
  const [agent1, agent2, agent3] = [new Types.ObjectId(), new Types.ObjectId(), new Types.ObjectId()];
  await transfer('completed', new Date(now - 2 * HOUR), { agent_id: agent1, bytes_transferred: 1000, files_transferred: 3 });
  await transfer('completed', new Date(now - 3 * HOUR), { agent_id: agent1, bytes_transferred: 500, files_transferred: 1 });
  await transfer('failed', new Date(now - 4 * HOUR), { agent_id: agent2, source_agent_id: agent3, bytes_transferred: 20, files_transferred: 0, error: 'x' });
  await transfer('in-progress', new Date(now - HOUR), { agent_id: agent2, bytes_transferred: 7 });
  await transfer('queued', new Date(now - 5 * HOUR));
  // Outside the default window (the last 24 hours).
  await transfer('completed', new Date(now - 30 * HOUR), { agent_id: new Types.ObjectId(), bytes_transferred: 1_000_000, files_transferred: 9 });

  const file = await uploaded(app, a.apiKey, 'one.txt', 'one');
  await uploaded(app, a.apiKey, 'two.txt', 'two');
  expect((await upload(app, a.apiKey, 'bad.com', eicar())).statusCode).toBe(422);
  expect((await app.inject({ method: 'GET', url: `/api/v1/files/${file.id}/download`, headers: auth(a.apiKey) })).statusCode).toBe(200);
  await uploaded(app, b.apiKey, 'b.txt', 'b');

  const res = await summary(a.apiKey);
  expect(res.statusCode).toBe(200);
  const data = res.json().data;
  expect(data).toEqual({
    from: expect.any(String), to: expect.any(String),
    transfers: { total: 5, by_status: { queued: 1, 'in-progress': 1, completed: 2, failed: 1, cancelled: 0 } },
    bytes_moved: 1527, files_moved: 4,
    uploads: 2, downloads: 1, blocked_uploads: 1, active_agents: 3,
  });
  expect(Date.parse(data.to) - Date.parse(data.from)).toBe(24 * HOUR);

  // A window around the old transfer only.
  const from = new Date(now - 31 * HOUR).toISOString();
  const to = new Date(now - 29 * HOUR).toISOString();
  expect((await summary(a.apiKey, `?from=${from}&to=${to}`)).json().data).toMatchObject({
    from, to, transfers: { total: 1, by_status: { completed: 1 } }, bytes_moved: 1_000_000, files_moved: 9, uploads: 0, downloads: 0, active_agents: 1,
  });

  // Account b sees its own upload and none of a's.
  expect((await summary(b.apiKey)).json().data).toMatchObject({ transfers: { total: 0 }, bytes_moved: 0, uploads: 1, downloads: 0, blocked_uploads: 0, active_agents: 0 });
});

it('is a read: it writes no audit record, no outbox event', async () => {
  const counts = async () => [await app.db.auditEvents.countDocuments({}), await app.db.outboxEvents.countDocuments({})];
  await summary(a.apiKey);
  const before = await counts();
  for (let i = 0; i < 3; i++) expect((await summary(a.apiKey)).statusCode).toBe(200);
  expect(await counts()).toEqual(before);
});

it('needs activity:read, and refuses a bad window with a 400 naming the field', async () => {
  const filesOnly = await createKey(app, a.apiKey, ['files:read']);
  expectError(await summary(filesOnly), 403, 'API key missing required scope');
  const reader = await createKey(app, a.apiKey, ['activity:read']);
  expect((await summary(reader)).statusCode).toBe(200);
  expectError(await summary(reader, '?from=yesterday'), 400, /from/);
  expectError(await summary(reader, '?to=2026-13-01T00:00:00Z'), 400, /to/);
  expectError(await summary(reader, '?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z'), 400, 'querystring.from must be earlier than querystring.to');
  expectError(await summary(reader, '?from=2024-01-01T00:00:00Z&to=2026-01-01T00:00:00Z'), 400, /at most 366 days apart/);
  expectError(await summary(reader, '?since=2026-01-01T00:00:00Z'), 400, /since/);
});

import { Messages } from '@xfer/shared';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, expectError, login, type TestAccount } from './helper.js';
import { eventually } from './protocol-client.js';

/**
 * The request path of authenticated reads (docs/security.md "Authentication"): one indexed read
 * for the key, nothing cached that a revocation, a deleted user or a changed role could outlive,
 * and no database write per request. Two instances on one database, as behind a load balancer.
 */
let a: App;
let b: App;
let owner: TestAccount;

beforeAll(async () => {
  // Rate-limit counts are reconciled once a second, not per request (rate-limit.test.ts): their
  // timer is left out here so that any write seen comes from a request.
  a = await buildTestApp({ rateLimitSyncMs: 3_600_000 });
  b = await buildTestApp({ rateLimitSyncMs: 3_600_000, databaseName: a.config.databaseName, masterKeys: a.config.masterKeys });
  owner = await createAccount(a);
});
afterAll(async () => {
  await b.close();
  await a.close();
});

const get = (app: App, token: string, url = '/api/v1/transfers') => app.inject({ method: 'GET', url, headers: auth(token) });

test('a key revoked through one instance is refused by the other on its very next request', async () => {
  const key = await createKey(a, owner.apiKey, ['transfers:read']);
  for (let i = 0; i < 3; i++) expect((await get(b, key)).statusCode).toBe(200);
  const id = (await a.db.apiKeys.findOne({ account_id: owner.accountId, name: 'test key' }).sort({ _id: -1 }).lean())!._id;
  expect((await a.inject({ method: 'DELETE', url: `/api/v1/api-keys/${String(id)}`, headers: auth(owner.apiKey) })).statusCode).toBe(200);
  expectError(await get(b, key), 401, Messages.unauthenticated);
  expectError(await get(a, key), 401, Messages.unauthenticated);
});

test('a session of a deleted user, or of a user whose role changed, is judged afresh on the other instance', async () => {
  const password = 'pw-request-path-1';
  const created = await a.inject({ method: 'POST', url: '/api/v1/users', headers: auth(owner.apiKey), payload: { email: `rp-${Date.now()}@example.test`, password, role: 'admin' } });
  expect(created.statusCode).toBe(201);
  const user = created.json().data as { id: string; email: string };
  const session = await login(a, user.email, password);
  expect((await get(b, session, '/api/v1/users')).statusCode).toBe(200);
  // Demoted to viewer through A: B refuses the next write at once.
  expect((await a.inject({ method: 'PUT', url: `/api/v1/users/${user.id}`, headers: auth(owner.apiKey), payload: { role: 'viewer' } })).statusCode).toBe(200);
  const refused = await b.inject({ method: 'POST', url: '/api/v1/users', headers: auth(session), payload: { email: `rp2-${Date.now()}@example.test`, password, role: 'viewer' } });
  expect(refused.statusCode).toBe(403);
  // Deleted through A: B refuses the next request at once.
  expect((await a.inject({ method: 'DELETE', url: `/api/v1/users/${user.id}`, headers: auth(owner.apiKey) })).statusCode).toBe(200);
  expectError(await get(b, session), 401, Messages.unauthenticated);
});

test('authenticated reads write nothing; last_used_at is sampled (once per minute per key)', async () => {
  const key = await createKey(a, owner.apiKey, ['transfers:read', 'activity:read']);
  const keyId = (await a.db.apiKeys.findOne({ account_id: owner.accountId }).sort({ _id: -1 }).lean())!._id;
  // The first use on each instance records it (last_uses, once per key and minute per instance).
  expect((await get(b, key)).statusCode).toBe(200);
  const firstUse = await eventually(async () => (await a.db.lastUses.findById(keyId).lean())?.at, 'last_used_at set');
  expect((await get(a, key)).statusCode).toBe(200);
  await eventually(async () => ((await a.db.lastUses.findById(keyId).lean())?.at ?? firstUse) > firstUse, 'second instance recorded its use');
  const sampled = (await a.db.lastUses.findById(keyId).lean())!.at;
  // The webhook deliverer marks the events of the tests above (user.login, user.registered) done
  // on its own timer: let it finish, so that any write seen comes from a request.
  await eventually(async () => (await a.db.outboxEvents.countDocuments({ status: 'pending' })) === 0, 'outbox fanned out');

  const writes: string[] = [];
  const WRITE = /^(insert|update|delete|replace|bulkWrite|findOneAndUpdate|findOneAndDelete|findOneAndReplace|create)/;
  for (const app of [a, b]) {
    app.dbConnection.set('debug', (collection: string, method: string) => {
      // The dispatcher's sweep of expired agent requests runs on its own timer, not on a request.
      if (WRITE.test(method) && collection !== 'agent_requests') writes.push(`${collection}.${method}`);
    });
  }
  try {
    for (let i = 0; i < 10; i++) {
      for (const app of [a, b]) {
        expect((await get(app, key)).statusCode).toBe(200);
        expect((await get(app, key, '/api/v1/activity')).statusCode).toBe(200);
      }
    }
  } finally {
    for (const app of [a, b]) app.dbConnection.set('debug', false);
  }
  expect(writes).toEqual([]);
  expect((await a.db.lastUses.findById(keyId).lean())!.at).toEqual(sampled);
});

test('a refused key stays refused without a read; a good key next to it is read every time', async () => {
  const unknown = `svc_${'D'.repeat(43)}`;
  const reads: string[] = [];
  a.dbConnection.set('debug', (collection: string, method: string) => {
    if (collection === 'api_keys') reads.push(method);
  });
  try {
    for (let i = 0; i < 5; i++) expectError(await get(a, unknown), 401, Messages.unauthenticated);
    expect(reads).toEqual(['findOne']);
    for (let i = 0; i < 3; i++) expect((await get(a, owner.apiKey)).statusCode).toBe(200);
    expect(reads).toEqual(['findOne', 'findOne', 'findOne', 'findOne']);
  } finally {
    a.dbConnection.set('debug', false);
  }
});

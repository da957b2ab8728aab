import { createHash } from 'node:crypto';
import type { App } from '../src/app.js';
import { Messages, SCOPES } from '@xfer/shared';
import { auth, buildTestApp, createAccount, createKey, expectError, login, type TestAccount } from './helper.js';
import { eventually } from './protocol-client.js';

let app: App;
let owner: TestAccount;

beforeAll(async () => {
  app = await buildTestApp();
  owner = await createAccount(app);
});
afterAll(() => app.close());

const create = (token: string, payload: Record<string, unknown>) =>
  app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(token), payload });

describe('POST /api-keys', () => {
  test('returns the full key once, with prefix, scopes, expiry and a top-level warning', async () => {
    const res = await create(owner.apiKey, { name: 'ci', scopes: ['files:read', 'transfers:write'], expires_in_days: 30 });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.warning).toBe(Messages.apiKeyWarning);
    expect(body.data.key).toMatch(/^svc_[A-Za-z0-9_-]{43}$/);
    expect(body.data.key_prefix).toBe(`${body.data.key.slice(0, 12)}...`);
    expect(body.data.scopes).toEqual(['files:read', 'transfers:write']);
    const days = (Date.parse(body.data.expires_at) - Date.now()) / 86_400_000;
    expect(days).toBeGreaterThan(29.9);
    expect(days).toBeLessThanOrEqual(30);
    // Stored as SHA-256 only.
    const stored = await app.db.apiKeys.findById(body.data.id).lean();
    expect(stored!.key_hash).toBe(createHash('sha256').update(body.data.key).digest('hex'));
    expect(JSON.stringify(stored)).not.toContain(body.data.key);
  });

  test('the new key authenticates with exactly its scopes', async () => {
    const key = await createKey(app, owner.apiKey, ['api-keys:read']);
    expect((await app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth(key) })).statusCode).toBe(200);
    expectError(await create(key, { name: 'x', scopes: ['api-keys:read'] }), 403, Messages.missingScope);
  });

  test('unknown scopes are 400', async () => {
    expectError(await create(owner.apiKey, { name: 'x', scopes: ['files:read', 'files:delete'] }), 400, /files:delete/);
    expectError(await create(owner.apiKey, { name: 'x', scopes: [] }), 400);
  });

  test('a key cannot grant scopes it does not hold', async () => {
    const limited = await createKey(app, owner.apiKey, ['api-keys:write', 'files:read']);
    expectError(await create(limited, { name: 'x', scopes: ['files:read', 'files:write'] }), 403, Messages.scopeEscalation);
    expect((await create(limited, { name: 'ok', scopes: ['files:read'] })).statusCode).toBe(201);
  });

  test('a session grants what its role allows', async () => {
    const session = await login(app, owner.email, owner.password);
    expect((await create(session, { name: 'from console', scopes: [...SCOPES] })).statusCode).toBe(201);
  });
});

describe('GET /api-keys', () => {
  test('lists prefixes only, never a key or hash, newest first with paging', async () => {
    const acct = await createAccount(app);
    const keys: string[] = [];
    for (let i = 0; i < 3; i++) keys.push(await createKey(app, acct.apiKey, ['files:read']));
    const first = await app.inject({ method: 'GET', url: '/api/v1/api-keys?limit=2', headers: auth(acct.apiKey) });
    expect(first.statusCode).toBe(200);
    const page1 = first.json();
    expect(page1.data).toHaveLength(2);
    expect(page1.next_cursor).toEqual(expect.any(String));
    const second = await app.inject({ method: 'GET', url: `/api/v1/api-keys?limit=2&cursor=${page1.next_cursor}`, headers: auth(acct.apiKey) });
    const page2 = second.json();
    expect(page2.data).toHaveLength(2); // 3 created + bootstrap key
    expect(page2.next_cursor).toBeNull();
    const all = [...page1.data, ...page2.data];
    expect(new Set(all.map((k: { id: string }) => k.id)).size).toBe(4);
    const text = JSON.stringify(all);
    for (const key of [...keys, acct.apiKey]) expect(text).not.toContain(key);
    expect(text).not.toContain('key_hash');
    expect(all[0].key_prefix).toBe(`${keys[2]!.slice(0, 12)}...`);
  });

  test('another account sees none of them', async () => {
    const other = await createAccount(app);
    const res = await app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth(other.apiKey) });
    expect(res.json().data).toHaveLength(1); // its own bootstrap key
  });

  test('last_used_at is recorded apart from the key, and shown in the list', async () => {
    const key = await createKey(app, owner.apiKey, ['api-keys:read']);
    const prefix = `${key.slice(0, 12)}...`;
    const listed = async () => ((await app.inject({ method: 'GET', url: '/api/v1/api-keys?limit=100', headers: auth(owner.apiKey) })).json().data as Array<{ key_prefix: string; last_used_at: string | null }>)
      .find((k) => k.key_prefix === prefix);
    expect((await listed())!.last_used_at).toBeNull();
    const before = Date.now();
    expect((await app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth(key) })).statusCode).toBe(200);
    const shown = await eventually(async () => (await listed())!.last_used_at, 'last_used_at shown');
    expect(Date.parse(shown)).toBeGreaterThanOrEqual(before - 1000);
    // The key's own document is never written by a use: only its creation and revocation write it.
    expect((await app.db.apiKeys.findOne({ key_prefix: prefix }).lean())!.last_used_at).toBeNull();
  });

  test('a revocation racing the first uses of the key is never undone (FerretDB writes whole documents back)', async () => {
    for (let i = 0; i < 15; i++) {
      const { id, key } = (await create(owner.apiKey, { name: `raced-${i}`, scopes: ['api-keys:read'] })).json().data;
      const [used, revoked] = await Promise.all([
        app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth(key) }),
        app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${id}`, headers: auth(owner.apiKey) }),
      ]);
      expect(revoked.statusCode).toBe(200);
      // A use that got in records itself off the request: let that write land first.
      if (used.statusCode === 200) await eventually(async () => app.db.lastUses.exists({ _id: id }), 'use recorded');
      expect((await app.db.apiKeys.findById(id).lean())!.revoked_at).toBeInstanceOf(Date);
      expectError(await app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth(key) }), 401, Messages.unauthenticated);
    }
  });
});

describe('DELETE /api-keys/:id', () => {
  test('revokes at once: the next request is 401; audited without the key', async () => {
    const res = await create(owner.apiKey, { name: 'doomed', scopes: ['api-keys:read'] });
    const { id, key } = res.json().data;
    expect((await app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth(key) })).statusCode).toBe(200);
    const del = await app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${id}`, headers: auth(owner.apiKey) });
    expect(del.statusCode).toBe(200);
    expect(del.json()).toEqual({ data: { id, deleted: true } });
    expectError(await app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth(key) }), 401, Messages.unauthenticated);
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${id}`, headers: auth(owner.apiKey) }), 404);
    const records = await app.db.auditEvents.find({ 'resource.id': id }).lean();
    expect(records.map((r) => r.action).sort()).toEqual(['api_key.create', 'api_key.revoke']);
    expect(JSON.stringify(records)).not.toContain(key);
  });

  test("another account's key is 404 and stays valid", async () => {
    const other = await createAccount(app);
    const res = await create(other.apiKey, { name: 'theirs', scopes: ['api-keys:read'] });
    const { id, key } = res.json().data;
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${id}`, headers: auth(owner.apiKey) }), 404);
    expect((await app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth(key) })).statusCode).toBe(200);
  });
});

describe('no escalation through keys (plugins/app/access/grant-rules.ts)', () => {
  const revoke = (token: string, id: string) => app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${id}`, headers: auth(token) });
  const whoAmI = (key: string) => app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth(key) });

  test('a narrow api-keys:write key cannot revoke a broader key, the bootstrap key included', async () => {
    const narrow = await createKey(app, owner.apiKey, ['api-keys:read', 'api-keys:write']);
    const broader = (await create(owner.apiKey, { name: 'broad', scopes: ['api-keys:read', 'files:read'] })).json().data;
    const bootstrap = await app.db.apiKeys.findOne({ key_hash: createHash('sha256').update(owner.apiKey).digest('hex') }).lean();
    expectError(await revoke(narrow, broader.id), 403, 'Cannot revoke a key holding scopes the calling key does not hold (files:read)');
    expectError(await revoke(narrow, String(bootstrap!._id)), 403, /^Cannot revoke a key holding scopes the calling key does not hold \(files:read, files:write, /);
    expect((await whoAmI(broader.key)).statusCode).toBe(200);
    expect((await whoAmI(owner.apiKey)).statusCode).toBe(200);
    const denied = await app.db.auditEvents.find({ action: 'api_key.revoke', outcome: 'denied', 'resource.id': broader.id }).lean();
    expect(denied).toHaveLength(1);
    expect(denied[0]!.details).toMatchObject({ reason: 'scope escalation', scopes: ['files:read'] });
  });

  test('a key revokes keys within its scopes, itself included', async () => {
    const narrow = await createKey(app, owner.apiKey, ['api-keys:read', 'api-keys:write', 'files:read']);
    const within = (await create(owner.apiKey, { name: 'within', scopes: ['files:read'] })).json().data;
    expect((await revoke(narrow, within.id)).statusCode).toBe(200);
    const self = await app.db.apiKeys.findOne({ key_hash: createHash('sha256').update(narrow).digest('hex') }).lean();
    expect((await revoke(narrow, String(self!._id))).statusCode).toBe(200);
    expectError(await whoAmI(narrow), 401);
  });

  test('an expiring key cannot create a key that never expires or outlives it', async () => {
    const expiring = (await create(owner.apiKey, { name: 'expiring', scopes: ['api-keys:write', 'files:read'], expires_in_days: 2 })).json().data;
    const ends = expiring.expires_at as string;
    expectError(await create(expiring.key, { name: 'forever', scopes: ['files:read'] }), 403,
      `The calling key expires at ${ends}: a key it creates must expire no later (the requested key never expires; give expires_at or expires_in_days within that)`);
    expectError(await create(expiring.key, { name: 'longer', scopes: ['files:read'], expires_in_days: 3 }), 403, /^The calling key expires at .*the requested key expires at /);
    const later = new Date(Date.parse(ends) + 1000).toISOString();
    expectError(await create(expiring.key, { name: 'a second later', scopes: ['files:read'], expires_at: later }), 403, /must expire no later/);
    expect(await app.db.apiKeys.countDocuments({ account_id: owner.accountId, name: { $in: ['forever', 'longer', 'a second later'] } })).toBe(0);
    // Up to its own end is fine, by days or by the exact instant.
    expect((await create(expiring.key, { name: 'shorter', scopes: ['files:read'], expires_in_days: 1 })).statusCode).toBe(201);
    const same = await create(expiring.key, { name: 'same end', scopes: ['files:read'], expires_at: ends });
    expect(same.statusCode).toBe(201);
    expect(same.json().data.expires_at).toBe(ends);
    const denied = await app.db.auditEvents.find({ account_id: owner.accountId, action: 'api_key.create', outcome: 'denied', 'details.reason': 'expiry beyond the calling key' }).lean();
    expect(denied).toHaveLength(3);
  });

  test('expires_at is validated: not with expires_in_days, not in the past, a real timestamp', async () => {
    const soon = new Date(Date.now() + 3_600_000).toISOString();
    expectError(await create(owner.apiKey, { name: 'x', scopes: ['files:read'], expires_at: soon, expires_in_days: 1 }), 400, 'body.expires_at and body.expires_in_days cannot both be given');
    expectError(await create(owner.apiKey, { name: 'x', scopes: ['files:read'], expires_at: '2001-01-01T00:00:00Z' }), 400, 'body.expires_at must be in the future');
    expectError(await create(owner.apiKey, { name: 'x', scopes: ['files:read'], expires_at: 'tomorrow' }), 400, /expires_at/);
    const res = await create(owner.apiKey, { name: 'hour', scopes: ['files:read'], expires_at: soon });
    expect(res.json().data.expires_at).toBe(soon);
  });

  test('a session (no expiry of its own authority) may create keys without expiry', async () => {
    const session = await login(app, owner.email, owner.password);
    expect((await create(session, { name: 'console key', scopes: ['files:read'] })).json().data.expires_at).toBeNull();
  });
});

import { createHash } from 'node:crypto';
import type { App } from '../src/app.js';
import { Messages, SCOPES } from '@xfer/shared';
import { auth, buildTestApp, createAccount, createKey, expectError, login, type TestAccount } from './helper.js';

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

  test('last_used_at is recorded', async () => {
    const key = await createKey(app, owner.apiKey, ['api-keys:read']);
    await app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth(key) });
    let stored = null;
    for (let i = 0; i < 20 && !stored?.last_used_at; i++) {
      await new Promise((r) => setTimeout(r, 50));
      stored = await app.db.apiKeys.findOne({ key_prefix: `${key.slice(0, 12)}...` }).lean();
    }
    expect(stored!.last_used_at).toBeInstanceOf(Date);
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

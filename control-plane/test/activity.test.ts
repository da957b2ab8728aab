import { randomBytes } from 'node:crypto';
import type { App } from '../src/app.js';
import { Messages, type AuditEvent } from '@xfer/shared';
import { auth, buildTestApp, createAccount, createKey, expectError, login, type TestAccount } from './helper.js';

let app: App;
let a: TestAccount;
let b: TestAccount;
let aKeyId: string;
let bKeyId: string;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const activity = (token: string, query = '') => app.inject({ method: 'GET', url: `/api/v1/activity${query}`, headers: auth(token) });

async function createKeyId(apiKey: string, name: string): Promise<string> {
  const res = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(apiKey), payload: { name, scopes: ['files:read'] } });
  return res.json().data.id as string;
}

/** Every record of a listing, following next_cursor. */
async function all(token: string, query: string, limit = 1000): Promise<AuditEvent[]> {
  const items: AuditEvent[] = [];
  let cursor: string | null = null;
  do {
    const res = await activity(token, `?limit=${limit}${query}${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.statusCode).toBe(200);
    const page = res.json();
    items.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor);
  return items;
}

beforeAll(async () => {
  app = await buildTestApp();
  a = await createAccount(app);
  b = await createAccount(app);
  await login(app, a.email, a.password);
  await login(app, b.email, b.password);
  aKeyId = await createKeyId(a.apiKey, 'a-key');
  bKeyId = await createKeyId(b.apiKey, 'b-key');
});
afterAll(() => app.close());

describe('GET /activity', () => {
  test("shows the caller's account's logins and key creations, and nothing of another account", async () => {
    const items = await all(a.apiKey, '');
    const actions = items.map((e) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['account.bootstrap', 'auth.login', 'api_key.create']));
    expect(items.every((e) => e.account_id === a.accountId)).toBe(true);
    const text = JSON.stringify(items);
    expect(text).not.toContain(b.accountId);
    expect(text).not.toContain(b.userId);
    expect(text).not.toContain(bKeyId);

    const login = items.find((e) => e.action === 'auth.login')!;
    expect(login).toMatchObject({ actor: { type: 'user', id: a.userId }, outcome: 'success', resource: null, ip: expect.any(String) });
    const created = items.find((e) => e.action === 'api_key.create')!;
    expect(Object.keys(created).sort()).toEqual(['account_id', 'action', 'actor', 'details', 'id', 'ip', 'outcome', 'resource', 'timestamp']);
    expect(created).toMatchObject({ resource: { type: 'api_key', id: aKeyId }, actor: { type: 'api_key' }, details: { name: 'a-key' } });
    expect(Number.isNaN(Date.parse(created.timestamp))).toBe(false);

    // The other account sees its own records, and not these.
    const theirs = await all(b.apiKey, '');
    expect(theirs.some((e) => e.resource?.id === bKeyId)).toBe(true);
    expect(JSON.stringify(theirs)).not.toContain(aKeyId);
  });

  test('filters by action, actor and resource', async () => {
    const created = await all(a.apiKey, '&action=api_key.create');
    expect(created.length).toBeGreaterThanOrEqual(1);
    expect(created.every((e) => e.action === 'api_key.create')).toBe(true);

    const byResource = await all(a.apiKey, `&resource_type=api_key&resource_id=${aKeyId}`);
    expect(byResource.map((e) => e.action)).toEqual(['api_key.create']);

    const byUser = await all(a.apiKey, `&actor_type=user&actor_id=${a.userId}`);
    expect(byUser.length).toBeGreaterThanOrEqual(1);
    expect(byUser.every((e) => e.actor.type === 'user' && e.actor.id === a.userId)).toBe(true);

    const system = await all(a.apiKey, '&actor_type=system');
    expect(system.map((e) => e.action)).toContain('account.bootstrap');

    // `auth.*` matches the prefix, literally (the dot is not a wildcard).
    await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: a.email, password: 'wrong-password-x' } });
    const authEvents = await all(a.apiKey, '&action=auth.*');
    expect(new Set(authEvents.map((e) => e.action))).toEqual(new Set(['auth.login']));
    expect(authEvents.map((e) => e.outcome)).toEqual(expect.arrayContaining(['success', 'failure']));
    expect(await all(a.apiKey, '&action=auth')).toEqual([]);
    expect(await all(a.apiKey, '&action=au.*')).toEqual([]);

    // A resource id of another account finds nothing.
    expect(await all(a.apiKey, `&resource_id=${bKeyId}`)).toEqual([]);
  });

  test('filters by time: since is inclusive, until exclusive', async () => {
    const acct = await createAccount(app);
    await login(app, acct.email, acct.password);
    await sleep(10);
    const t0 = new Date();
    await sleep(10);
    const keyId = await createKeyId(acct.apiKey, 'after-t0');
    const after = await all(acct.apiKey, `&since=${t0.toISOString()}`);
    expect(after.map((e) => e.resource?.id)).toEqual([keyId]);
    const before = await all(acct.apiKey, `&until=${t0.toISOString()}`);
    expect(before.map((e) => e.action).sort()).toEqual(['account.bootstrap', 'auth.login']);
    const exact = after[0]!.timestamp;
    expect((await all(acct.apiKey, `&since=${exact}`)).map((e) => e.resource?.id)).toEqual([keyId]);
    expect(await all(acct.apiKey, `&until=${exact}&since=${t0.toISOString()}`)).toEqual([]);
    // Offsets other than Z are understood.
    const plusTwo = new Date(t0.getTime() + 2 * 3600_000).toISOString().replace('Z', '+02:00');
    expect((await all(acct.apiKey, `&since=${encodeURIComponent(plusTwo)}`)).map((e) => e.resource?.id)).toEqual([keyId]);
  });

  test('pages newest first without repeats', async () => {
    const acct = await createAccount(app);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await createKeyId(acct.apiKey, `k${i}`));
    const paged = await all(acct.apiKey, '', 2);
    expect(paged).toHaveLength(6); // bootstrap + 5 key creations
    expect(new Set(paged.map((e) => e.id)).size).toBe(6);
    expect(paged.slice(0, 5).map((e) => e.resource?.id)).toEqual([...ids].reverse());
    expect(paged[5]!.action).toBe('account.bootstrap');
    const times = paged.map((e) => Date.parse(e.timestamp));
    expect([...times].sort((x, y) => y - x)).toEqual(times);
    const first = (await activity(acct.apiKey, '?limit=5')).json();
    expect(first.data).toHaveLength(5);
    expect(first.next_cursor).toEqual(expect.any(String));
    const last = (await activity(acct.apiKey, `?limit=5&cursor=${first.next_cursor}`)).json();
    expect(last.data.map((e: AuditEvent) => e.action)).toEqual(['account.bootstrap']);
    expect(last.next_cursor).toBeNull();
  });

  test('invalid filters are 400 naming the parameter', async () => {
    expectError(await activity(a.apiKey, '?since=yesterday'), 400, /since/);
    expectError(await activity(a.apiKey, '?until=2024-13-01T00:00:00Z'), 400, /until/);
    expectError(await activity(a.apiKey, '?since=2024-01-01'), 400, /since/);
    expectError(await activity(a.apiKey, '?since=2024-02-01T00:00:00Z&until=2024-01-01T00:00:00Z'), 400, /since must be earlier than/);
    expectError(await activity(a.apiKey, '?since=2024-01-01T00:00:00Z&until=2024-01-01T00:00:00Z'), 400, /since must be earlier than/);
    expectError(await activity(a.apiKey, '?actor_type=robot'), 400, /actor_type must be one of/);
    expectError(await activity(a.apiKey, '?action='), 400, /action/);
    expectError(await activity(a.apiKey, '?verb=x'), 400, /unknown field 'verb'/);
    expectError(await activity(a.apiKey, `?cursor=${randomBytes(6).toString('hex')}`), 400, /cursor/);
    expectError(await activity(a.apiKey, '?limit=0'), 400, /limit/);
    expectError(await activity(a.apiKey, '?limit=1001'), 400, /limit/);
  });

  test('needs activity:read; every role of a session has it', async () => {
    const key = await createKey(app, a.apiKey, ['files:read']);
    expectError(await activity(key), 403, Messages.missingScope);
    const reader = await createKey(app, a.apiKey, ['activity:read']);
    expect((await activity(reader)).statusCode).toBe(200);
    const email = `viewer-${randomBytes(4).toString('hex')}@example.test`;
    const password = `pw-${randomBytes(10).toString('hex')}`;
    await app.inject({ method: 'POST', url: '/api/v1/users', headers: auth(a.apiKey), payload: { email, role: 'viewer', password } });
    const viewer = await login(app, email, password);
    const res = await activity(viewer, '?action=user.create');
    expect(res.statusCode).toBe(200);
    expect(res.json().data[0]).toMatchObject({ action: 'user.create', details: { email, role: 'viewer' } });
    expect(JSON.stringify(res.json())).not.toContain(password);
  });
});

import { randomBytes } from 'node:crypto';
import type { App } from '../src/app.js';
import { Messages, type Role } from '@xfer/shared';
import { auth, buildTestApp, createAccount, expectError, login, type TestAccount } from './helper.js';

let app: App;
let owner: TestAccount;
let ownerSession: string;

beforeAll(async () => {
  app = await buildTestApp();
  owner = await createAccount(app);
  ownerSession = await login(app, owner.email, owner.password);
});
afterAll(() => app.close());

const call = (method: 'GET' | 'PUT' | 'DELETE', path: string, token: string, payload?: Record<string, unknown>) =>
  app.inject({ method, url: `/api/v1/settings/${path}`, headers: auth(token), ...(payload ? { payload } : {}) });

/** A user of `account` with `role`, signed in. */
async function addUser(role: Role, adminToken: string): Promise<{ id: string; email: string; password: string; session: string }> {
  const email = `${role}-${randomBytes(4).toString('hex')}@example.test`;
  const password = `pw-${randomBytes(10).toString('hex')}`;
  const res = await app.inject({ method: 'POST', url: '/api/v1/users', headers: auth(adminToken), payload: { email, role, password } });
  if (res.statusCode !== 201) throw new Error(`addUser: ${res.statusCode} ${res.body}`);
  return { id: res.json().data.id, email, password, session: await login(app, email, password) };
}

const settingAudits = (accountId: string, setting: string) =>
  app.db.auditEvents.find({ account_id: accountId, action: 'setting.update', 'resource.id': setting }).sort({ _id: 1 }).lean();

describe('console only', () => {
  test('every /settings route refuses an API key, even one holding every scope, with 403', async () => {
    const routes = app.apiRoutes.filter((r) => r.url.startsWith('/api/v1/settings/'));
    const paths = new Set(routes.map((r) => r.url.replace('/api/v1/settings/', '')));
    expect([...paths].sort()).toEqual(['avatar', 'login-events', 'mfa', 'mfa/verify', 'plan', 'retention', 'service-principals', 'sessions', 'test-status']);
    for (const route of routes) {
      expect(route.access.consoleOnly).toBe(true);
      const body = route.method === 'PUT' || route.method === 'POST' ? { payload: {} } : {};
      const res = await app.inject({ method: route.method as 'GET', url: route.url, headers: auth(owner.apiKey), ...body });
      expectError(res, 403, Messages.consoleOnly);
    }
    // Nothing was changed by the refused calls, and each refusal was audited.
    expect(await app.db.settings.countDocuments({ account_id: owner.accountId })).toBe(0);
    expect(await app.db.users.findById(owner.userId).lean()).toMatchObject({ mfa_secret: null, mfa_pending_secret: null });
    await app.authDenials.flush();
    const denials = await app.db.auditEvents.countDocuments({ account_id: owner.accountId, action: 'auth.denied', 'details.reason': 'console-only route' });
    expect(denials).toBe(routes.length);
  });

  test('without credentials they are 401', async () => {
    expectError(await app.inject({ method: 'GET', url: '/api/v1/settings/mfa' }), 401, Messages.unauthenticated);
  });
});

describe('per-user settings', () => {
  // The whole MFA flow (verify, login with a code, turning it off) is in mfa.test.ts.
  test('mfa: off by default, enrolment per user, audited', async () => {
    const member = await addUser('member', ownerSession);
    expect((await call('GET', 'mfa', member.session)).json()).toEqual({ data: { enabled: false, pending: false } });
    const put = await call('PUT', 'mfa', member.session, { enabled: true });
    expect(put.statusCode).toBe(200);
    expect(put.json().data).toEqual({ enabled: false, pending: true, secret: expect.any(String), otpauth_url: expect.any(String) });
    expect((await call('GET', 'mfa', member.session)).json().data).toEqual({ enabled: false, pending: true });
    // Another user of the same account keeps their own setting.
    expect((await call('GET', 'mfa', ownerSession)).json().data).toEqual({ enabled: false, pending: false });
    expectError(await call('PUT', 'mfa', member.session, { enabled: 'yes' }), 400, /enabled must be boolean/);
    expectError(await call('PUT', 'mfa', member.session, {}), 400, /enabled is required/);
    const records = await settingAudits(owner.accountId, 'mfa');
    expect(records).toHaveLength(1);
    expect(records[0]).toMatchObject({ actor: { type: 'user', id: member.id }, outcome: 'success', details: { scope: 'user', change: 'enroll', enabled: false } });
  });

  test('avatar: an https URL or null; anything else is 400', async () => {
    const viewer = await addUser('viewer', ownerSession);
    expect((await call('GET', 'avatar', viewer.session)).json().data).toEqual({ url: null, updated_at: null });
    const url = 'https://cdn.example.test/avatars/v.png';
    expect((await call('PUT', 'avatar', viewer.session, { url })).json().data.url).toBe(url);
    expect((await call('GET', 'avatar', viewer.session)).json().data.url).toBe(url);
    expectError(await call('PUT', 'avatar', viewer.session, { url: 'http://cdn.example.test/a.png' }), 400, /url/);
    expectError(await call('PUT', 'avatar', viewer.session, { url: 'javascript:alert(1)' }), 400, /url/);
    expectError(await call('PUT', 'avatar', viewer.session, { url: 'https://' + 'a'.repeat(2100) + '.test/' }), 400, /url/);
    expect((await call('PUT', 'avatar', viewer.session, { url: null })).json().data.url).toBeNull();
    expect((await settingAudits(owner.accountId, 'avatar')).map((r) => (r.details as { url: unknown }).url)).toEqual([url, null]);
  });

  test('login-events: this user\'s sign-ins only, successful and failed, newest first, paged', async () => {
    const acct = await createAccount(app);
    const session = await login(app, acct.email, acct.password);
    const other = await addUser('admin', session);
    await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: acct.email, password: 'wrong-password-1' } });
    await login(app, acct.email, acct.password);
    const first = await call('GET', 'login-events?limit=2', session);
    expect(first.statusCode).toBe(200);
    const page1 = first.json();
    expect(page1.data.map((e: { outcome: string }) => e.outcome)).toEqual(['success', 'failure']);
    const second = await call('GET', `login-events?limit=2&cursor=${page1.next_cursor}`, session);
    const page2 = second.json();
    expect(page2.data.map((e: { outcome: string }) => e.outcome)).toEqual(['success']);
    expect(page2.next_cursor).toBeNull();
    for (const event of [...page1.data, ...page2.data]) {
      expect(event).toMatchObject({ action: 'auth.login', account_id: acct.accountId, actor: { type: 'user', id: acct.userId } });
    }
    // The admin sees only their own sign-in.
    const theirs = (await call('GET', 'login-events', other.session)).json().data;
    expect(theirs.map((e: { actor: { id: string } }) => e.actor.id)).toEqual([other.id]);
    expect(JSON.stringify(page1)).not.toContain('wrong-password-1');
  });
});

describe('sessions', () => {
  test('shows the session lifetime; signing out everywhere ends every session of the user, this one included', async () => {
    const acct = await createAccount(app);
    const session = await login(app, acct.email, acct.password);
    const elsewhere = await login(app, acct.email, acct.password);
    const shown = (await call('GET', 'sessions', session)).json().data;
    expect(shown).toMatchObject({ sessions_valid_after: null, session_ttl_seconds: app.config.sessionTtlSeconds });
    const expiresIn = Date.parse(shown.current_session_expires_at) - Date.now();
    expect(expiresIn).toBeGreaterThan(0);
    expect(expiresIn).toBeLessThanOrEqual(app.config.sessionTtlSeconds * 1000);

    const res = await call('DELETE', 'sessions', session);
    expect(res.statusCode).toBe(200);
    const body = res.json().data;
    expect(body).toEqual({ id: acct.userId, deleted: true, sessions_valid_after: expect.any(String) });
    expectError(await call('GET', 'sessions', session), 401, Messages.unauthenticated);
    expectError(await call('GET', 'mfa', elsewhere), 401, Messages.unauthenticated);
    // The account's API key is not a session and keeps working.
    expect((await app.inject({ method: 'GET', url: '/api/v1/activity', headers: auth(acct.apiKey) })).statusCode).toBe(200);

    const fresh = await login(app, acct.email, acct.password);
    expect((await call('GET', 'sessions', fresh)).json().data.sessions_valid_after).toBe(body.sessions_valid_after);
    expect(await settingAudits(acct.accountId, 'sessions')).toHaveLength(1);
  });

  test("signing out everywhere leaves other users' sessions alone", async () => {
    const acct = await createAccount(app);
    const session = await login(app, acct.email, acct.password);
    const member = await addUser('member', session);
    expect((await call('DELETE', 'sessions', member.session)).statusCode).toBe(200);
    expect((await call('GET', 'sessions', session)).statusCode).toBe(200);
    expectError(await call('GET', 'sessions', member.session), 401);
  });
});

describe('account settings', () => {
  test('retention: defaults, partial update, bounds, shared by the account', async () => {
    const acct = await createAccount(app);
    const session = await login(app, acct.email, acct.password);
    const admin = await addUser('admin', session);
    expect((await call('GET', 'retention', session)).json().data).toEqual({ audit_days: 365, deleted_files_days: 30, updated_at: null });
    const put = await call('PUT', 'retention', admin.session, { audit_days: 730 });
    expect(put.json().data).toEqual({ audit_days: 730, deleted_files_days: 30, updated_at: expect.any(String) });
    expect((await call('PUT', 'retention', session, { deleted_files_days: 7 })).json().data).toMatchObject({ audit_days: 730, deleted_files_days: 7 });
    expect((await call('GET', 'retention', admin.session)).json().data).toMatchObject({ audit_days: 730, deleted_files_days: 7 });
    for (const bad of [{ audit_days: 29 }, { audit_days: 3651 }, { deleted_files_days: 0 }, { audit_days: 90.5 }, { audit_days: '90' }, {}, { keep: 1 }]) {
      expectError(await call('PUT', 'retention', session, bad), 400);
    }
    expect((await call('GET', 'retention', session)).json().data).toMatchObject({ audit_days: 730, deleted_files_days: 7 });
    // Another account has its own policy.
    const otherSession = await login(app, owner.email, owner.password);
    expect((await call('GET', 'retention', otherSession)).json().data.audit_days).toBe(365);
    const records = await settingAudits(acct.accountId, 'retention');
    expect(records.map((r) => r.details)).toEqual([
      { scope: 'account', audit_days: 730, deleted_files_days: 30 },
      { scope: 'account', audit_days: 730, deleted_files_days: 7 },
    ]);
  });

  test('members and viewers read account settings but cannot change them', async () => {
    const acct = await createAccount(app);
    const session = await login(app, acct.email, acct.password);
    for (const role of ['member', 'viewer'] as const) {
      const user = await addUser(role, session);
      expect((await call('GET', 'retention', user.session)).statusCode).toBe(200);
      expect((await call('GET', 'service-principals', user.session)).statusCode).toBe(200);
      expectError(await call('PUT', 'retention', user.session, { audit_days: 60 }), 403, new RegExp(`role \\(${role}\\)`));
      expectError(await call('PUT', 'service-principals', user.session, { service_principals: [] }), 403, /owner or admin/);
      // Their own settings are theirs to change.
      expect((await call('PUT', 'mfa', user.session, { enabled: true })).statusCode).toBe(200);
      expect((await call('PUT', 'avatar', user.session, { url: null })).statusCode).toBe(200);
    }
    expect(await app.db.settings.countDocuments({ account_id: acct.accountId, user_id: null })).toBe(0);
    const denied = await app.db.auditEvents.countDocuments({ account_id: acct.accountId, action: 'setting.update', outcome: 'denied' });
    expect(denied).toBe(4);
  });

  test('service principals: the whole list is replaced; duplicates and bad entries are 400', async () => {
    const acct = await createAccount(app);
    const session = await login(app, acct.email, acct.password);
    expect((await call('GET', 'service-principals', session)).json().data).toEqual({ service_principals: [], updated_at: null });
    const list = [{ name: 'CI pipeline', client_id: '6f1c2a3b-0000-4000-8000-000000000001' }, { name: 'Backup', client_id: 'backup-app' }];
    const put = await call('PUT', 'service-principals', session, { service_principals: list });
    expect(put.statusCode).toBe(200);
    expect(put.json().data.service_principals).toEqual(list);
    expect((await call('GET', 'service-principals', session)).json().data.service_principals).toEqual(list);
    expectError(await call('PUT', 'service-principals', session, { service_principals: [list[0], { name: 'ci PIPELINE', client_id: 'x' }] }), 400, /duplicate name/);
    expectError(await call('PUT', 'service-principals', session, { service_principals: [list[0], { name: 'Other', client_id: list[0]!.client_id }] }), 400, /duplicate client_id/);
    expectError(await call('PUT', 'service-principals', session, { service_principals: [{ name: 'x' }] }), 400, /client_id is required/);
    expectError(await call('PUT', 'service-principals', session, { service_principals: [{ name: 'x', client_id: 'a', secret: 's' }] }), 400, /unknown field 'secret'/);
    expect((await call('PUT', 'service-principals', session, { service_principals: [] })).json().data.service_principals).toEqual([]);
    const records = await settingAudits(acct.accountId, 'service-principals');
    expect(records.map((r) => (r.details as { count: number }).count)).toEqual([2, 0]);
  });

  test('test-status reports the database', async () => {
    const res = await call('GET', 'test-status', ownerSession);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual({ status: 'ok', database: 'ok', database_latency_ms: expect.any(Number), checked_at: expect.any(String) });
  });
});

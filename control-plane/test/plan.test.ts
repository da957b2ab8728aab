import { Messages } from '@xfer/shared';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, expectError, login } from './helper.js';

// GET/PUT /settings/plan: an owner's session changes the account's plan, and the Team rules
// (API keys and webhooks) apply from the very next request, on every instance.

let app: App;
let second: App;

beforeAll(async () => {
  app = await buildTestApp();
  // Another instance on the same database: it must see a change at once too (no plan cache).
  second = await buildTestApp({ databaseName: app.config.databaseName });
});
afterAll(async () => {
  await second.close();
  await app.close();
});

const plan = (a: App, token: string, payload?: Record<string, unknown>) =>
  a.inject({ method: payload ? 'PUT' : 'GET', url: '/api/v1/settings/plan', headers: auth(token), ...(payload ? { payload } : {}) });
const listKeys = (a: App, key: string) => a.inject({ method: 'GET', url: '/api/v1/api-keys', headers: auth(key) });

it('an owner upgrades and downgrades; the Team rules apply from the next request on every instance', async () => {
  const owner = await createAccount(app, 'free');
  const session = await login(app, owner.email, owner.password);
  expect((await plan(app, session)).json()).toEqual({ data: { plan: 'free', updated_at: null } });
  expectError(await listKeys(second, owner.apiKey), 403, Messages.planRequired);

  const up = await plan(app, session, { plan: 'team' });
  expect(up.statusCode).toBe(200);
  expect(up.json().data).toEqual({ plan: 'team', updated_at: expect.any(String) });
  expect((await listKeys(second, owner.apiKey)).statusCode).toBe(200);
  expect((await listKeys(app, owner.apiKey)).statusCode).toBe(200);

  // What needs Team blocks the way back to free until it is gone.
  const key = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(owner.apiKey), payload: { name: 'ci', scopes: ['files:read'] } });
  const hook = await app.inject({ method: 'POST', url: '/api/v1/webhooks', headers: auth(owner.apiKey), payload: { url: 'https://8.8.8.8/hook', events: ['user.login'] } });
  expect([key.statusCode, hook.statusCode]).toEqual([201, 201]);
  expectError(await plan(app, session, { plan: 'free' }), 409,
    'Cannot change the plan to free: the account has 1 API key(s) and 1 webhook(s), which need the Team plan; revoke and delete them first');
  expect((await plan(app, session)).json().data.plan).toBe('team');
  await app.inject({ method: 'DELETE', url: `/api/v1/api-keys/${key.json().data.id}`, headers: auth(owner.apiKey) });
  await app.inject({ method: 'DELETE', url: `/api/v1/webhooks/${hook.json().data.id}`, headers: auth(owner.apiKey) });

  expect((await plan(app, session, { plan: 'free' })).json().data.plan).toBe('free');
  expectError(await listKeys(second, owner.apiKey), 403, Messages.planRequired);
  expectError(await app.inject({ method: 'GET', url: '/api/v1/webhooks', headers: auth(owner.apiKey) }), 403, Messages.planRequired);
  // The bootstrap key still works for the rest, as on every free account.
  expect((await app.inject({ method: 'GET', url: '/api/v1/files', headers: auth(owner.apiKey) })).statusCode).toBe(200);

  // Setting the same plan again changes nothing and records nothing.
  const changes = async () => (await app.db.auditEvents.find({ account_id: owner.accountId, action: 'setting.update', 'resource.id': 'plan' }).sort({ _id: 1 }).lean());
  const before = await changes();
  expect((await plan(app, session, { plan: 'free' })).statusCode).toBe(200);
  expect(await changes()).toHaveLength(before.length);
  expect(before.map((r) => [r.outcome, (r.details as Record<string, unknown>).plan_from, (r.details as Record<string, unknown>).plan_to]))
    .toEqual([['success', 'free', 'team'], ['success', 'team', 'free']]);
});

it('only an owner\'s session changes it: admins are refused (audited), API keys get the console-only 403, bad input 400', async () => {
  const owner = await createAccount(app, 'team');
  const ownerSession = await login(app, owner.email, owner.password);
  const email = `admin-${Date.now()}@example.test`;
  const created = await app.inject({ method: 'POST', url: '/api/v1/users', headers: auth(owner.apiKey), payload: { email, role: 'admin', password: 'admin-password-1' } });
  expect(created.statusCode).toBe(201);
  const admin = await login(app, email, 'admin-password-1');
  expect((await plan(app, admin)).json().data.plan).toBe('team');
  expectError(await plan(app, admin, { plan: 'enterprise' }), 403, 'Only an owner can change the plan; your role is admin');
  const denied = await app.db.auditEvents.findOne({ account_id: owner.accountId, action: 'setting.update', outcome: 'denied' }).lean();
  expect(denied).toMatchObject({ actor: { type: 'user', id: created.json().data.id }, resource: { id: 'plan' }, details: { reason: 'role admin' } });
  expectError(await plan(app, owner.apiKey, { plan: 'enterprise' }), 403, Messages.consoleOnly);
  expectError(await plan(app, owner.apiKey), 403, Messages.consoleOnly);
  expectError(await plan(app, ownerSession, { plan: 'gold' }), 400, /plan/);
  expectError(await plan(app, ownerSession, { plan: 'team', extra: 1 }), 400, /extra|additional/);
  expectError(await plan(app, ownerSession, {}), 400, /plan/);
  expect((await plan(app, ownerSession)).json().data.plan).toBe('team');
});

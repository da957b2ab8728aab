import { WEBHOOK_EVENT_TYPES } from '@xfer/shared';
import type { App } from '../src/app.js';
import { OUTBOX_EVENT_TYPES } from '../src/plugins/app/webhooks/index.js';
import { auth, buildTestApp, createAccount, expectError, type TestAccount } from './helper.js';

// The outbox's event types against the types webhooks may subscribe to (api.md "Events", shared
// WEBHOOK_EVENT_TYPES), and the user events: user.login on a session sign-in, user.registered
// when a user is created through the API.

describe('the outbox event types', () => {
  it('are exactly the types a webhook may subscribe to (api.md "Events" and workflow.*)', () => {
    expect([...OUTBOX_EVENT_TYPES].sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort());
    expect(OUTBOX_EVENT_TYPES).toEqual(expect.arrayContaining(['user.login', 'user.registered']));
  });
});

describe('user events', () => {
  let app: App;
  let owner: TestAccount;
  const events = (accountId: string, type: string) =>
    app.db.outboxEvents.find({ account_id: accountId, type }).sort({ _id: 1 }).lean();

  beforeAll(async () => {
    app = await buildTestApp();
    owner = await createAccount(app);
  });
  afterAll(async () => {
    await app.close();
  });

  it('bootstrap emits nothing for the first owner (no webhook of a new account could receive it)', async () => {
    expect(await events(owner.accountId, 'user.registered')).toEqual([]);
  });

  it('a session sign-in emits user.login; a failed one emits nothing', async () => {
    const before = (await events(owner.accountId, 'user.login')).length;
    const bad = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: owner.email, password: 'wrong-password-123' } });
    expectError(bad, 401);
    expect(await events(owner.accountId, 'user.login')).toHaveLength(before);

    const ok = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: owner.email.toUpperCase(), password: owner.password } });
    expect(ok.statusCode).toBe(200);
    const logins = await events(owner.accountId, 'user.login');
    expect(logins).toHaveLength(before + 1);
    expect(logins.at(-1)).toMatchObject({ status: 'pending', data: { id: owner.userId, email: owner.email, ip: '127.0.0.1', mfa: false } });
    // No secret in the event: not the password, not the session token.
    expect(JSON.stringify(logins.at(-1)!.data)).not.toContain(owner.password);
    expect(JSON.stringify(logins.at(-1)!.data)).not.toContain(ok.json().data.token);
  });

  it('POST /users emits user.registered in the caller\'s account only; a refused create emits nothing', async () => {
    const other = await createAccount(app);
    const email = `new-${Date.now()}@example.test`;
    const res = await app.inject({
      method: 'POST', url: '/api/v1/users', headers: auth(owner.apiKey), payload: { email, name: 'New One', role: 'member', password: 'a-long-password-1' },
    });
    expect(res.statusCode).toBe(201);
    const created = res.json().data;
    const registered = await events(owner.accountId, 'user.registered');
    expect(registered.at(-1)?.data).toEqual({ id: created.id, email, name: 'New One', role: 'member' });
    expect(JSON.stringify(registered.at(-1)!.data)).not.toContain('a-long-password-1');
    expect(await events(other.accountId, 'user.registered')).toEqual([]);

    const duplicate = await app.inject({
      method: 'POST', url: '/api/v1/users', headers: auth(owner.apiKey), payload: { email, role: 'member', password: 'a-long-password-1' },
    });
    expectError(duplicate, 409);
    expect(await events(owner.accountId, 'user.registered')).toHaveLength(registered.length);
  });
});

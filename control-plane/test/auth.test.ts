import type { App } from '../src/app.js';
import { Messages } from '@xfer/shared';
import { auth, buildTestApp, createAccount, createKey, expectError, login, type TestAccount } from './helper.js';

let app: App;
let owner: TestAccount;

beforeAll(async () => {
  app = await buildTestApp();
  owner = await createAccount(app);
});
afterAll(() => app.close());

const listKeys = (token?: string) =>
  app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: token === undefined ? {} : auth(token) });

describe('authentication', () => {
  test('missing, malformed, unknown and wrong-kind tokens are 401 with one message', async () => {
    expectError(await listKeys(), 401, Messages.unauthenticated);
    expectError(await app.inject({ method: 'GET', url: '/api/v1/api-keys', headers: { authorization: 'Basic abc' } }), 401, Messages.unauthenticated);
    expectError(await listKeys('svc_' + 'A'.repeat(43)), 401, Messages.unauthenticated);
    expectError(await listKeys('eyJhbGciOiJIUzI1NiJ9.e30.invalid'), 401, Messages.unauthenticated);
  });

  test('every denial is audited without the token', async () => {
    const token = 'svc_' + 'B'.repeat(43);
    await listKeys(token);
    await app.authDenials.flush();
    const denials = await app.db.auditEvents.find({ action: 'auth.denied' }).lean();
    expect(denials.length).toBeGreaterThan(0);
    expect(JSON.stringify(denials)).not.toContain(token);
  });

  test('login returns a session that works and follows the role', async () => {
    const token = await login(app, owner.email, owner.password);
    const res = await listKeys(token);
    expect(res.statusCode).toBe(200);
  });

  test('login with a wrong password or unknown email is 401 and audited', async () => {
    for (const payload of [{ email: owner.email, password: 'wrong-password' }, { email: 'nobody@example.test', password: 'whatever-123' }]) {
      expectError(await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload }), 401, Messages.unauthenticated);
    }
    const failures = await app.db.auditEvents.find({ action: 'auth.login', outcome: 'failure' }).lean();
    expect(failures.length).toBeGreaterThanOrEqual(2);
    expect(JSON.stringify(failures)).not.toContain('wrong-password');
  });

  test('login email is case-insensitive', async () => {
    await expect(login(app, owner.email.toUpperCase(), owner.password)).resolves.toEqual(expect.any(String));
  });

  test('a session token signed with another key is refused', async () => {
    const other = await buildTestApp();
    try {
      const foreign = other.jwt.sign({ sub: owner.userId, acc: owner.accountId, iat_ms: Date.now() });
      expectError(await listKeys(foreign), 401, Messages.unauthenticated);
    } finally {
      await other.close();
    }
  });

  test('an expired key is 401', async () => {
    const key = await createKey(app, owner.apiKey, ['api-keys:read'], { expires_in_days: 1 });
    expect((await listKeys(key)).statusCode).toBe(200);
    // The first use's sampled write goes to last_uses, never to the key's document, so the
    // expiry set here cannot be written over by it (api-key-use.model.ts).
    await app.db.apiKeys.updateOne({ key_prefix: `${key.slice(0, 12)}...` }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    expectError(await listKeys(key), 401, Messages.unauthenticated);
  });
});

describe('plans', () => {
  test('API key management needs the Team plan', async () => {
    const free = await createAccount(app, 'free');
    expectError(await listKeys(free.apiKey), 403, Messages.planRequired);
    const create = await app.inject({ method: 'POST', url: '/api/v1/api-keys', headers: auth(free.apiKey), payload: { name: 'x', scopes: ['files:read'] } });
    expectError(create, 403, Messages.planRequired);
    // The bootstrap key still works for everything else on the free plan.
    expect((await app.inject({ method: 'GET', url: '/api/v1/activity', headers: auth(free.apiKey) })).statusCode).toBe(200);
  });

  test('enterprise has Team features', async () => {
    const ent = await createAccount(app, 'enterprise');
    expect((await listKeys(ent.apiKey)).statusCode).toBe(200);
  });
});

import { Types } from 'mongoose';
import type { LightMyRequestResponse } from 'fastify';
import type { App } from '../src/app.js';
import { base32Decode, hotp, timeStep } from '../src/lib/totp.js';
import type { Sealed } from '../src/lib/vault.js';
import { LoginMessages, Messages, MfaMessages } from '@xfer/shared';
import { auth, buildTestApp, createAccount, expectError, login, type TestAccount } from './helper.js';
import { boundTo } from '../src/lib/sealed-fields.js';

let app: App;

beforeAll(async () => {
  app = await buildTestApp();
});
afterAll(() => app.close());

const PERIOD_MS = 30_000;

/**
 * The current time step, after waiting into the next one if fewer than `roomMs` are left: codes
 * computed for steps around it stay inside the server's ±1 window for the rest of the test.
 */
async function stepWithRoom(roomMs = 10_000): Promise<number> {
  const left = PERIOD_MS - (Date.now() % PERIOD_MS);
  if (left < roomMs) await new Promise((resolve) => setTimeout(resolve, left + 50));
  return timeStep(Date.now());
}

const codeAt = (secret: string, step: number) => hotp(base32Decode(secret), step);

/** A well-formed code that no step of the window around `step` produces. */
function wrongCode(secret: string, step: number): string {
  const valid = new Set([-1, 0, 1].map((d) => codeAt(secret, step + d)));
  for (let n = 0; ; n++) {
    const code = String(n).padStart(6, '0');
    if (!valid.has(code)) return code;
  }
}

const mfaCall = (method: 'GET' | 'PUT' | 'POST', path: '' | '/verify', token: string, payload?: Record<string, unknown>) =>
  app.inject({ method, url: `/api/v1/settings/mfa${path}`, headers: auth(token), ...(payload ? { payload } : {}) });

const loginWith = (acct: TestAccount, extra: Record<string, unknown> = {}) =>
  app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: acct.email, password: acct.password, ...extra } });

const rawUser = (acct: TestAccount) => app.db.users.collection.findOne({ _id: new Types.ObjectId(acct.userId) });

const loginFailures = async (acct: TestAccount) =>
  (await app.db.auditEvents.find({ account_id: acct.accountId, action: 'auth.login', outcome: 'failure' }).sort({ _id: 1 }).lean())
    .map((e) => (e.details as { reason: string }).reason);

const mfaAudits = (acct: TestAccount) =>
  app.db.auditEvents.find({ account_id: acct.accountId, action: 'setting.update', 'resource.id': 'mfa' }).sort({ _id: 1 }).lean();

/** A fresh account whose owner has MFA on, activated with the code of `step - 1`. */
async function withMfa(): Promise<{ acct: TestAccount; session: string; secret: string; step: number }> {
  const acct = await createAccount(app);
  const session = await login(app, acct.email, acct.password);
  const secret = (await mfaCall('PUT', '', session, { enabled: true })).json().data.secret as string;
  const step = await stepWithRoom();
  expect((await mfaCall('POST', '/verify', session, { code: codeAt(secret, step - 1) })).statusCode).toBe(200);
  return { acct, session, secret, step };
}

function expectSession(res: LightMyRequestResponse): void {
  expect({ status: res.statusCode, body: res.body }).toMatchObject({ status: 200 });
  expect(res.json().data).toEqual({ token: expect.any(String), expires_at: expect.any(String) });
}

describe('enrolment', () => {
  test('enrol → verify → login: the secret is shown once, MFA starts with the first valid code', async () => {
    const acct = await createAccount(app);
    const session = await login(app, acct.email, acct.password);
    expect((await mfaCall('GET', '', session)).json()).toEqual({ data: { enabled: false, pending: false } });

    const put = await mfaCall('PUT', '', session, { enabled: true });
    expect(put.statusCode).toBe(200);
    const { secret, otpauth_url: url } = put.json().data;
    expect(put.json().data).toEqual({ enabled: false, pending: true, secret: expect.stringMatching(/^[A-Z2-7]{32}$/), otpauth_url: url });
    expect(url).toBe(`otpauth://totp/xfer:${acct.email}?secret=${secret}&issuer=xfer&algorithm=SHA1&digits=6&period=30`);
    expect(base32Decode(secret)).toHaveLength(20);

    const pending = await mfaCall('GET', '', session);
    expect(pending.json()).toEqual({ data: { enabled: false, pending: true } });
    // Until verified, login does not ask for a code.
    expectSession(await loginWith(acct));

    const step = await stepWithRoom();
    expectError(await mfaCall('POST', '/verify', session, { code: wrongCode(secret, step) }), 400, MfaMessages.codeInvalid);
    expectError(await mfaCall('POST', '/verify', session, { code: '12345' }), 400, /code has an invalid format/);
    expect((await mfaCall('GET', '', session)).json().data).toEqual({ enabled: false, pending: true });
    const verified = await mfaCall('POST', '/verify', session, { code: codeAt(secret, step - 1) });
    expect(verified.statusCode).toBe(200);
    expect(verified.json()).toEqual({ data: { enabled: true, pending: false } });
    expect((await mfaCall('GET', '', session)).json()).toEqual({ data: { enabled: true, pending: false } });
    expectError(await mfaCall('POST', '/verify', session, { code: codeAt(secret, step) }), 409, MfaMessages.nothingPending);

    const records = await mfaAudits(acct);
    expect(records.map((r) => [r.outcome, r.details])).toEqual([
      ['success', { scope: 'user', change: 'enroll', enabled: false }],
      ['failure', { scope: 'user', change: 'activate', reason: 'wrong code' }],
      ['success', { scope: 'user', change: 'activate', enabled: true }],
    ]);
    // The session opened before MFA was turned on keeps working.
    expect((await mfaCall('GET', '', session)).statusCode).toBe(200);
  });

  test('while MFA is on, enrolling again is 409 and keeps the active authenticator', async () => {
    const { acct, session, secret, step } = await withMfa();
    expectError(await mfaCall('PUT', '', session, { enabled: true }), 409, MfaMessages.alreadyEnabled);
    expect((await mfaCall('GET', '', session)).json().data).toEqual({ enabled: true, pending: false });
    expectSession(await loginWith(acct, { otp: codeAt(secret, step) }));
  });

  test('a pending enrolment can be restarted (only the newest secret activates) or cancelled without a code', async () => {
    const acct = await createAccount(app);
    const session = await login(app, acct.email, acct.password);
    const first = (await mfaCall('PUT', '', session, { enabled: true })).json().data.secret as string;
    const second = (await mfaCall('PUT', '', session, { enabled: true })).json().data.secret as string;
    expect(second).not.toBe(first);
    const step = await stepWithRoom();
    expectError(await mfaCall('POST', '/verify', session, { code: wrongCode(second, step) }), 400, MfaMessages.codeInvalid);

    const cancel = await mfaCall('PUT', '', session, { enabled: false });
    expect(cancel.json()).toEqual({ data: { enabled: false, pending: false } });
    expectError(await mfaCall('POST', '/verify', session, { code: codeAt(second, step) }), 409, MfaMessages.nothingPending);
    // Turning off what is already off changes nothing and writes no record.
    expect((await mfaCall('PUT', '', session, { enabled: false })).json()).toEqual({ data: { enabled: false, pending: false } });
    expect((await mfaAudits(acct)).filter((r) => r.outcome === 'success').map((r) => (r.details as { change: string }).change))
      .toEqual(['enroll', 'enroll', 'cancel']);
  });
});

describe('login with MFA on', () => {
  test('no code is 401 "One-time code required"; a wrong, old or reused code is 401; a fresh code signs in', async () => {
    const { acct, secret, step } = await withMfa();
    expectError(await loginWith(acct), 401, LoginMessages.otpRequired);
    // A wrong password says nothing about MFA, code or no code.
    expectError(await loginWith(acct, { password: 'wrong-password-9', otp: codeAt(secret, step) }), 401, Messages.unauthenticated);
    expectError(await loginWith(acct, { password: 'wrong-password-9' }), 401, Messages.unauthenticated);
    expectError(await loginWith(acct, { otp: wrongCode(secret, step) }), 401, Messages.unauthenticated);
    // The code that activated MFA was used up by it.
    expectError(await loginWith(acct, { otp: codeAt(secret, step - 1) }), 401, Messages.unauthenticated);

    const signedIn = await loginWith(acct, { otp: codeAt(secret, step) });
    expectSession(signedIn);
    expect((await mfaCall('GET', '', signedIn.json().data.token)).json().data.enabled).toBe(true);
    expectError(await loginWith(acct, { otp: codeAt(secret, step) }), 401, Messages.unauthenticated);
    expectSession(await loginWith(acct, { otp: codeAt(secret, step + 1) }));
    // Once a later step is used, codes of earlier steps are refused too.
    expectError(await loginWith(acct, { otp: codeAt(secret, step) }), 401, Messages.unauthenticated);

    expect(await loginFailures(acct)).toEqual([
      'otp required', 'wrong password', 'wrong password', 'wrong otp', 'otp replayed', 'otp replayed', 'otp replayed',
    ]);
    const successes = await app.db.auditEvents.find({ account_id: acct.accountId, action: 'auth.login', outcome: 'success' }).sort({ _id: 1 }).lean();
    expect(successes.map((e) => e.details ?? null)).toEqual([null, { mfa: true }, { mfa: true }]);
  });

  test('one code used by two concurrent logins signs in only one of them', async () => {
    const { acct, secret, step } = await withMfa();
    const otp = codeAt(secret, step);
    const results = await Promise.all([loginWith(acct, { otp }), loginWith(acct, { otp })]);
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 401]);
    expect(await loginFailures(acct)).toEqual(['otp replayed']);
  });

  test('otp must be six digits; users without MFA may send one and it is ignored', async () => {
    const acct = await createAccount(app);
    expectError(await loginWith(acct, { otp: '12345' }), 400, /otp has an invalid format/);
    expectError(await loginWith(acct, { otp: 123456 }), 400, /otp must be string/);
    expectSession(await loginWith(acct, { otp: '123456' }));
  });
});

describe('turning MFA off', () => {
  test('needs a current, unused code of the active authenticator; then login needs no code', async () => {
    const { acct, session, secret, step } = await withMfa();
    expectError(await mfaCall('PUT', '', session, { enabled: false }), 400, MfaMessages.codeRequired);
    expectError(await mfaCall('PUT', '', session, { enabled: false, code: wrongCode(secret, step) }), 400, MfaMessages.codeInvalid);
    expectError(await mfaCall('PUT', '', session, { enabled: false, code: codeAt(secret, step - 1) }), 400, MfaMessages.codeInvalid);
    expect((await mfaCall('GET', '', session)).json().data).toEqual({ enabled: true, pending: false });
    expectError(await loginWith(acct), 401, LoginMessages.otpRequired);

    const off = await mfaCall('PUT', '', session, { enabled: false, code: codeAt(secret, step) });
    expect(off.statusCode).toBe(200);
    expect(off.json()).toEqual({ data: { enabled: false, pending: false } });
    expectSession(await loginWith(acct));
    expect(await rawUser(acct)).toMatchObject({ mfa_secret: null, mfa_pending_secret: null });

    const records = await mfaAudits(acct);
    expect(records.slice(2).map((r) => [r.outcome, r.details])).toEqual([
      ['failure', { scope: 'user', change: 'disable', reason: 'code missing' }],
      ['failure', { scope: 'user', change: 'disable', reason: 'wrong code' }],
      ['failure', { scope: 'user', change: 'disable', reason: 'code replayed' }],
      ['success', { scope: 'user', change: 'disable', enabled: false }],
    ]);
  });
});

describe('access and secrecy', () => {
  test('API keys get 403 on every mfa route, even with every scope, and change nothing', async () => {
    const acct = await createAccount(app);
    const routes = app.apiRoutes.filter((r) => r.url.startsWith('/api/v1/settings/mfa'));
    expect(routes.map((r) => `${r.method} ${r.url}`).sort()).toEqual([
      'GET /api/v1/settings/mfa', 'POST /api/v1/settings/mfa/verify', 'PUT /api/v1/settings/mfa',
    ]);
    const bodies: Record<string, Record<string, unknown>> = { PUT: { enabled: true }, POST: { code: '123456' } };
    for (const route of routes) {
      const payload = bodies[route.method];
      const res = await app.inject({ method: route.method as 'GET', url: route.url, headers: auth(acct.apiKey), ...(payload ? { payload } : {}) });
      expectError(res, 403, Messages.consoleOnly);
    }
    expect(await rawUser(acct)).toMatchObject({ mfa_secret: null, mfa_pending_secret: null });
    expect(await mfaAudits(acct)).toHaveLength(0);
  });

  test('the secret is stored sealed and never appears in answers, audit records or the user document', async () => {
    const { acct, session, secret, step } = await withMfa();
    const bytes = base32Decode(secret);
    const forms = [secret, secret.toLowerCase(), bytes.toString('hex'), bytes.toString('base64'), bytes.toString('base64url')];
    const expectNoSecret = (text: string) => {
      for (const form of forms) expect(text).not.toContain(form);
    };

    const stored = await rawUser(acct);
    expectNoSecret(JSON.stringify(stored));
    expect(stored!.mfa_pending_secret).toBeNull();
    expect(app.vault.open<string>(stored!.mfa_secret as Sealed, boundTo('user.mfa', stored!))).toBe(secret);

    const signedIn = await loginWith(acct, { otp: codeAt(secret, step) });
    expectSession(signedIn);
    expectNoSecret((await mfaCall('GET', '', session)).body);
    expectNoSecret((await app.inject({ method: 'GET', url: '/api/v1/users', headers: auth(acct.apiKey) })).body);
    expectNoSecret((await app.inject({ method: 'GET', url: `/api/v1/users/${acct.userId}`, headers: auth(session) })).body);
    expectNoSecret((await app.inject({ method: 'GET', url: '/api/v1/settings/login-events', headers: auth(session) })).body);

    const records = JSON.stringify(await app.db.auditEvents.find({ account_id: acct.accountId }).lean());
    expectNoSecret(records);
    for (const code of [codeAt(secret, step - 1), codeAt(secret, step)]) expect(records).not.toContain(`"${code}"`);
  });
});

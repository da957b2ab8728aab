import { setTimeout as sleep } from 'node:timers/promises';
import type { App } from '../src/app.js';
import type { LoginLockoutConfig } from '../src/config.js';
import { LoginLockoutService } from '../src/plugins/app/access/login-lockout.service.js';
import { buildTestApp, createAccount, type TestAccount } from './helper.js';

/**
 * Sign-in lockout with backoff, per email and per client address, shared by every instance on
 * one database (plugins/app/access/login-lockout.service.ts; docs/security.md "Sign-in lockout").
 * Locks here are short (3 s, doubling up to 24 s) so that a test can wait one out, yet longer
 * than a password check on a busy machine takes.
 */
const LOCKOUT: LoginLockoutConfig = { emailThreshold: 3, ipThreshold: 6, baseMs: 3000, maxMs: 24_000, windowMs: 3600_000 };

let a: App;
let b: App;
/** Locks of a minute, for tests that must find a lock still in force after slow password checks. */
let slow: App;
beforeAll(async () => {
  a = await buildTestApp({ loginLockout: LOCKOUT });
  b = await buildTestApp({ loginLockout: LOCKOUT, databaseName: a.config.databaseName, masterKeys: a.config.masterKeys });
  slow = await buildTestApp({ loginLockout: { ...LOCKOUT, baseMs: 60_000, maxMs: 600_000 } });
});
afterAll(async () => {
  await slow.close();
  await b.close();
  await a.close();
});

let seq = 0;
/** Each test signs in from addresses of its own, so the per-address counts do not mix. */
const nextAddress = () => `198.51.100.${++seq}`;

function login(app: App, email: string, password: string, remoteAddress: string) {
  return app.inject({ method: 'POST', url: '/api/v1/auth/login', remoteAddress, payload: { email, password } });
}

async function failTimes(app: App, n: number, email: string, address: string) {
  for (let i = 0; i < n; i++) expect((await login(app, email, 'wrong-password-1', address)).statusCode).toBe(401);
}

function retryAfter(res: Awaited<ReturnType<typeof login>>): number {
  expect(res.statusCode).toBe(429);
  expect(res.json()).toEqual({ error: `Too many failed sign-in attempts; try again in ${res.headers['retry-after']} s` });
  return Number(res.headers['retry-after']);
}

describe('per email', () => {
  let owner: TestAccount;
  beforeAll(async () => {
    owner = await createAccount(a);
  });

  test('after the threshold even the right password is refused with 429 + Retry-After, audited; once the lock ends it works', async () => {
    const address = nextAddress();
    await failTimes(a, LOCKOUT.emailThreshold, owner.email, address);
    const locked = await login(a, owner.email, owner.password, address);
    const wait = retryAfter(locked);
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(3);
    const records = await a.db.auditEvents.find({ action: 'auth.login', 'actor.id': owner.userId }).sort({ _id: 1 }).lean();
    expect(records.map((r) => r.outcome)).toEqual(['failure', 'failure', 'failure', 'denied']);
    expect(records[2]!.details).toMatchObject({ reason: 'wrong password', locked_on: 'email', locked_for_s: expect.any(Number) });
    expect(records[3]!.details).toMatchObject({ reason: 'locked out', locked_on: 'email', retry_after_s: wait });
    expect(JSON.stringify(records)).not.toContain(owner.password);

    await sleep(wait * 1000);
    expect((await login(a, owner.email, owner.password, address)).statusCode).toBe(200);
    // A success starts the email afresh: the next failure is a plain 401 again.
    expect((await login(a, owner.email, 'wrong-password-1', address)).statusCode).toBe(401);
    expect((await login(a, owner.email, owner.password, address)).statusCode).toBe(200);
  });

  test('each failure past the threshold doubles the lock', async () => {
    const acct = await createAccount(a);
    const address = nextAddress();
    const { email: key } = LoginLockoutService.keys(acct.email, address);
    /** Lets the lock run out without waiting for it: every attempt of the email moves back in time. */
    const timePasses = async (seconds: number) => {
      for (const doc of await a.db.loginAttempts.find({ key }).lean()) {
        await a.db.loginAttempts.updateOne({ _id: doc._id }, { $set: { at: new Date(doc.at.getTime() - seconds * 1000) } });
      }
    };
    await failTimes(a, LOCKOUT.emailThreshold, acct.email, address);
    const waits: number[] = [];
    for (let i = 0; i < 3; i++) {
      const wait = retryAfter(await login(a, acct.email, 'wrong-password-1', address));
      waits.push(wait);
      await timePasses(wait);
      // The lock is over: this attempt is checked (and fails again), which locks for twice as long.
      expect((await login(a, acct.email, 'wrong-password-1', address)).statusCode).toBe(401);
    }
    // 3 s, 6 s, 12 s from each failure, less the time its password check took (under 3 s).
    [3, 6, 12].forEach((full, i) => {
      expect(waits[i]).toBeLessThanOrEqual(full);
      expect(waits[i]).toBeGreaterThan(full - 3);
    });
    // Attempts refused while locked do not lengthen it.
    const now = retryAfter(await login(a, acct.email, 'wrong-password-1', address));
    expect(now).toBeLessThanOrEqual(24);
    expect(retryAfter(await login(a, acct.email, 'wrong-password-1', address))).toBeLessThanOrEqual(now);
  });

  test('an unknown email locks exactly like a known one: the answer does not say which exists', async () => {
    const known = await createAccount(slow);
    const unknown = `nobody-${seq}@example.test`;
    const address = nextAddress();
    await failTimes(slow, LOCKOUT.emailThreshold, known.email, address);
    await failTimes(slow, LOCKOUT.emailThreshold, unknown, nextAddress());
    const k = await login(slow, known.email, 'x-password-1', address);
    const u = await login(slow, unknown, 'x-password-1', address);
    // The same answer but for the seconds left, which differ by the time between the two locks.
    const shape = (r: typeof k) => [r.statusCode, r.body.replace(/\d+ s"/, 'N s"'), Object.keys(r.headers).sort()];
    expect(shape(k)).toEqual(shape(u));
    expect(retryAfter(k)).toBeGreaterThan(50);
    // Only a hash of the email is stored, never the email.
    expect(JSON.stringify(await slow.db.loginAttempts.find({}).lean())).not.toContain(unknown);
  });

  test('a lock made on one instance holds on the other (state in the database)', async () => {
    const acct = await createAccount(a);
    const address = nextAddress();
    await failTimes(a, LOCKOUT.emailThreshold, acct.email, address);
    retryAfter(await login(b, acct.email, acct.password, nextAddress()));
  });

  test('a burst of parallel guesses is counted as it arrives: most are refused without a password check', async () => {
    const acct = await createAccount(slow);
    const address = nextAddress();
    const burst = await Promise.all(Array.from({ length: 12 }, (_, i) => login(slow, acct.email, `guess-${i}-password`, address)));
    const statuses = burst.map((r) => r.statusCode);
    expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
    // Counted in arrival order on one instance (LoginLockoutService.order): no more than the threshold get a password check.
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(LOCKOUT.emailThreshold);
    retryAfter(await login(slow, acct.email, acct.password, address));
  });
});

describe('per client address', () => {
  test('failures over many emails lock the address, for every email, while other addresses sign in', async () => {
    const acct = await createAccount(a);
    const address = nextAddress();
    for (let i = 0; i < LOCKOUT.ipThreshold; i++) {
      expect((await login(a, `spray-${i}-${seq}@example.test`, 'wrong-password-1', address)).statusCode).toBe(401);
    }
    const locked = await login(a, acct.email, acct.password, address);
    retryAfter(locked);
    const record = await a.db.auditEvents.findOne({ action: 'auth.login', outcome: 'denied', 'actor.id': acct.userId }).lean();
    expect(record!.details).toMatchObject({ reason: 'locked out', locked_on: 'ip' });
    expect((await login(a, acct.email, acct.password, nextAddress())).statusCode).toBe(200);
  });

  test('a success from an address does not wipe its failures against other emails', async () => {
    const acct = await createAccount(a);
    const address = nextAddress();
    for (let i = 0; i < LOCKOUT.ipThreshold - 1; i++) {
      expect((await login(a, `spray2-${i}-${seq}@example.test`, 'wrong-password-1', address)).statusCode).toBe(401);
    }
    expect((await login(a, acct.email, acct.password, address)).statusCode).toBe(200);
    expect((await login(a, `spray2-last-${seq}@example.test`, 'wrong-password-1', address)).statusCode).toBe(401);
    retryAfter(await login(a, acct.email, acct.password, address));
  });
});

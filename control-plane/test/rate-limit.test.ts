import type { App } from '../src/app.js';
import { Messages } from '@xfer/shared';
import { auth, buildTestApp, createAccount, expectError } from './helper.js';

const LIMIT = 5;
/** The reconciliation timer never fires during a test: the tests call rateLimiter.sync() themselves. */
const NO_TIMER = { rateLimitPerMinute: LIMIT, rateLimitSyncMs: 3_600_000 };

/** Fixed windows: start a burst early in a minute so it cannot straddle two windows. */
async function awayFromWindowEdge(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 5_000) await new Promise((r) => setTimeout(r, left + 100));
}

let a: App;
let b: App;

beforeAll(async () => {
  a = await buildTestApp(NO_TIMER);
  // A second instance on the same database, as behind a load balancer.
  b = await buildTestApp({ ...NO_TIMER, databaseName: a.config.databaseName });
});
afterAll(async () => {
  await b.close();
  await a.close();
});

const get = (app: App, apiKey: string) => app.inject({ method: 'GET', url: '/api/v1/activity', headers: auth(apiKey) });
const syncBoth = async () => {
  await a.rateLimiter.sync();
  await b.rateLimiter.sync();
};

test('one instance: headers on every response, exactly the budget, then 429 with Retry-After; another account has its own', async () => {
  const one = await createAccount(a);
  const two = await createAccount(a);
  await awayFromWindowEdge();
  const remaining: number[] = [];
  for (let i = 0; i < LIMIT; i++) {
    const res = await get(a, one.apiKey);
    expect(res.statusCode).toBe(200);
    expect(res.headers['ratelimit-limit']).toBe(String(LIMIT));
    expect(Number(res.headers['ratelimit-reset'])).toBeGreaterThan(0);
    remaining.push(Number(res.headers['ratelimit-remaining']));
  }
  expect(remaining).toEqual([4, 3, 2, 1, 0]);
  const limited = await get(a, one.apiKey);
  expectError(limited, 429, Messages.rateLimited);
  expect(limited.headers['ratelimit-remaining']).toBe('0');
  expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
  expect((await get(a, two.apiKey)).statusCode).toBe(200);
});

test('one instance: concurrent requests never exceed the budget', async () => {
  const acct = await createAccount(a);
  await awayFromWindowEdge();
  const results = await Promise.all(Array.from({ length: 12 }, () => get(a, acct.apiKey)));
  expect(results.filter((r) => r.statusCode === 200)).toHaveLength(LIMIT);
  expect(results.filter((r) => r.statusCode === 429)).toHaveLength(12 - LIMIT);
});

test('counting writes nothing per request: only a reconciliation writes, one count per instance and key', async () => {
  const acct = await createAccount(a);
  await awayFromWindowEdge();
  for (let i = 0; i < 3; i++) expect((await get(a, acct.apiKey)).statusCode).toBe(200);
  const key = `account:${acct.accountId}`;
  expect(await a.db.rateLimitCounts.countDocuments({ key })).toBe(0);
  await a.rateLimiter.sync();
  expect(await a.db.rateLimitCounts.find({ key }, { count: 1, _id: 0 }).lean()).toEqual([{ count: 3 }]);
});

test('two instances share the budget once their counts have met', async () => {
  const acct = await createAccount(a);
  await awayFromWindowEdge();
  for (let i = 0; i < 2; i++) expect((await get(a, acct.apiKey)).statusCode).toBe(200);
  expect((await get(b, acct.apiKey)).headers['ratelimit-remaining']).toBe(String(LIMIT - 1));
  await syncBoth();
  // B now knows A's 2: of its budget 1 + 2 are used, it admits the remaining 2.
  const remaining: number[] = [];
  for (let i = 0; i < 2; i++) {
    const res = await get(b, acct.apiKey);
    expect(res.statusCode).toBe(200);
    remaining.push(Number(res.headers['ratelimit-remaining']));
  }
  expect(remaining).toEqual([1, 0]);
  expectError(await get(b, acct.apiKey), 429, Messages.rateLimited);
  // A learns B's 3 once B has written them and A has read them.
  await b.rateLimiter.sync();
  await a.rateLimiter.sync();
  expectError(await get(a, acct.apiKey), 429, Messages.rateLimited);
});

test('two instances between reconciliations: the overshoot stays within the documented bound', async () => {
  // docs/security.md "Rate limits": admitted ≤ limit + what the other instances admitted since the
  // counts last met. Here both instances take turns and reconcile after every 2 requests each.
  const acct = await createAccount(a);
  await awayFromWindowEdge();
  let admitted = 0;
  let sinceSync = { a: 0, b: 0 };
  let bound = LIMIT;
  for (let round = 0; round < 6; round++) {
    for (const [name, app] of [['a', a], ['b', b]] as const) {
      for (let i = 0; i < 2; i++) {
        const res = await get(app, acct.apiKey);
        if (res.statusCode === 200) {
          admitted++;
          sinceSync[name]++;
        } else {
          expectError(res, 429, Messages.rateLimited);
        }
      }
    }
    // Whatever one instance admitted unseen by the other may come on top of the budget.
    bound = Math.max(bound, LIMIT + Math.max(sinceSync.a, sinceSync.b));
    await syncBoth();
    sinceSync = { a: 0, b: 0 };
  }
  expect(admitted).toBeGreaterThanOrEqual(LIMIT);
  expect(admitted).toBeLessThanOrEqual(bound);
  // Once the counts have met, both refuse.
  expectError(await get(a, acct.apiKey), 429, Messages.rateLimited);
  expectError(await get(b, acct.apiKey), 429, Messages.rateLimited);
});

test('unauthenticated requests are limited per address, carry the headers and write nothing', async () => {
  await awayFromWindowEdge();
  const before = { audit: await a.db.auditEvents.countDocuments(), counts: await a.db.rateLimitCounts.countDocuments() };
  const statuses: number[] = [];
  for (let i = 0; i < LIMIT + 1; i++) {
    const res = await a.inject({ method: 'GET', url: '/api/v1/transfers', headers: auth(`svc_${'C'.repeat(43)}`), remoteAddress: '203.0.113.9' });
    expect(res.headers['ratelimit-limit']).toBe(String(LIMIT));
    statuses.push(res.statusCode);
  }
  expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
  // Another address has a budget of its own.
  expect((await a.inject({ method: 'GET', url: '/api/v1/transfers', remoteAddress: '203.0.113.10' })).statusCode).toBe(401);
  await a.rateLimiter.sync();
  expect(await a.db.auditEvents.countDocuments()).toBe(before.audit);
  expect(await a.db.rateLimitCounts.countDocuments()).toBe(before.counts);
  // The denials reach the audit trail counted: one record per address, reason and route.
  await a.authDenials.flush();
  const records = await a.db.auditEvents.find({ action: 'auth.denied', ip: '203.0.113.9' }).lean();
  expect(records).toHaveLength(1);
  expect(records[0]).toMatchObject({ outcome: 'denied', resource: { type: 'route', id: 'GET /api/v1/transfers' }, details: { reason: 'unknown key', status: 401, count: LIMIT } });
});

test('login is limited per address too', async () => {
  await awayFromWindowEdge();
  const statuses: number[] = [];
  for (let i = 0; i < LIMIT + 1; i++) {
    const res = await a.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: 'x@example.test', password: 'nope-nope' }, remoteAddress: '203.0.113.11' });
    statuses.push(res.statusCode);
  }
  expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
});

test('health is not rate limited', async () => {
  for (let i = 0; i < LIMIT + 2; i++) {
    expect((await a.inject({ method: 'GET', url: '/api/v1/health', remoteAddress: '203.0.113.12' })).statusCode).toBe(200);
  }
});

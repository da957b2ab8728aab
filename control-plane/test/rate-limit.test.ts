import type { App } from '../src/app.js';
import { Messages } from '@xfer/shared';
import { auth, buildTestApp, createAccount, expectError } from './helper.js';

const LIMIT = 5;

/** Fixed windows: start a burst early in a minute so it cannot straddle two windows. */
async function awayFromWindowEdge(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 5_000) await new Promise((r) => setTimeout(r, left + 100));
}

let a: App;
let b: App;

beforeAll(async () => {
  a = await buildTestApp({ rateLimitPerMinute: LIMIT });
  // A second instance on the same database, as behind a load balancer.
  b = await buildTestApp({ rateLimitPerMinute: LIMIT, databaseName: a.config.databaseName });
});
afterAll(async () => {
  await b.close();
  await a.close();
});

test('headers on every response, 429 with Retry-After past the limit, per account, across instances', async () => {
  const one = await createAccount(a);
  const two = await createAccount(a);
  await awayFromWindowEdge();
  const remaining: number[] = [];
  for (let i = 0; i < LIMIT; i++) {
    const app = i % 2 === 0 ? a : b;
    const res = await app.inject({ method: 'GET', url: '/api/v1/activity', headers: auth(one.apiKey) });
    expect(res.statusCode).toBe(200);
    expect(res.headers['ratelimit-limit']).toBe(String(LIMIT));
    expect(Number(res.headers['ratelimit-reset'])).toBeGreaterThan(0);
    remaining.push(Number(res.headers['ratelimit-remaining']));
  }
  expect(remaining).toEqual([4, 3, 2, 1, 0]);
  const limited = await b.inject({ method: 'GET', url: '/api/v1/activity', headers: auth(one.apiKey) });
  expectError(limited, 429, Messages.rateLimited);
  expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  expect(Number(limited.headers['retry-after'])).toBeLessThanOrEqual(60);
  // Another account has its own budget.
  expect((await a.inject({ method: 'GET', url: '/api/v1/activity', headers: auth(two.apiKey) })).statusCode).toBe(200);
});

test('concurrent requests never exceed the limit', async () => {
  const acct = await createAccount(a);
  await awayFromWindowEdge();
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) => (i % 2 ? a : b).inject({ method: 'GET', url: '/api/v1/activity', headers: auth(acct.apiKey) })),
  );
  expect(results.filter((r) => r.statusCode === 200)).toHaveLength(LIMIT);
  expect(results.filter((r) => r.statusCode === 429)).toHaveLength(12 - LIMIT);
});

test('unauthenticated requests are limited per address, and 401s carry the headers', async () => {
  await awayFromWindowEdge();
  const statuses: number[] = [];
  for (let i = 0; i < LIMIT + 1; i++) {
    const res = await a.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email: 'x@example.test', password: 'nope-nope' }, remoteAddress: '203.0.113.9' });
    expect(res.headers['ratelimit-limit']).toBe(String(LIMIT));
    statuses.push(res.statusCode);
  }
  expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
});

test('health is not rate limited', async () => {
  for (let i = 0; i < LIMIT + 2; i++) {
    expect((await a.inject({ method: 'GET', url: '/api/v1/health', remoteAddress: '203.0.113.10' })).statusCode).toBe(200);
  }
});

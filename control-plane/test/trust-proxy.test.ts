import type { App } from '../src/app.js';
import { parseTrustProxy } from '../src/config.js';
import { buildTestApp } from './helper.js';

/**
 * X-Forwarded-For is believed only from trusted hops (XFER_TRUST_PROXY, docs/configuration.md).
 * What the app takes as the client address is read where it matters: the audit record of a
 * failed login (the same `request.ip` the per-address limits and the login lockout use).
 */
const apps: App[] = [];
afterAll(() => Promise.all(apps.map((a) => a.close())));

async function appTrusting(raw: string): Promise<App> {
  const app = await buildTestApp({ trustProxy: parseTrustProxy(raw) });
  apps.push(app);
  return app;
}

/** The client address the app recorded for a failed login sent from `peer` with `forwarded`. */
async function seenAddress(app: App, peer: string, forwarded?: string): Promise<string> {
  const marker = `nobody-${Math.random().toString(36).slice(2)}@example.test`;
  const res = await app.inject({
    method: 'POST', url: '/api/v1/auth/login', remoteAddress: peer,
    headers: forwarded ? { 'x-forwarded-for': forwarded } : {}, payload: { email: marker, password: 'wrong-password-1' },
  });
  expect(res.statusCode).toBe(401);
  const records = await app.db.auditEvents.find({ action: 'auth.login', outcome: 'failure' }).sort({ _id: -1 }).limit(1).lean();
  return records[0]!.ip as string;
}

test('not set: X-Forwarded-For is ignored, the socket peer is the client', async () => {
  const app = await appTrusting('');
  expect(await seenAddress(app, '198.51.100.7', '203.0.113.9')).toBe('198.51.100.7');
});

test('a CIDR list: honoured from a listed proxy, ignored from anyone else', async () => {
  const app = await appTrusting('10.0.0.0/8,192.0.2.1');
  expect(await seenAddress(app, '10.1.2.3', '203.0.113.9')).toBe('203.0.113.9');
  expect(await seenAddress(app, '192.0.2.1', '203.0.113.10')).toBe('203.0.113.10');
  // A client speaking directly cannot pick its address.
  expect(await seenAddress(app, '198.51.100.7', '203.0.113.9')).toBe('198.51.100.7');
  // A chain: the address left of the last trusted proxy is the client, whatever the client prepended.
  expect(await seenAddress(app, '10.1.2.3', '6.6.6.6, 203.0.113.11, 10.9.9.9')).toBe('203.0.113.11');
});

test('a hop count: exactly that many proxies are believed, a prepended address is not', async () => {
  const app = await appTrusting('1');
  expect(await seenAddress(app, '10.1.2.3', '6.6.6.6, 203.0.113.12')).toBe('203.0.113.12');
  const two = await appTrusting('2');
  expect(await seenAddress(two, '10.1.2.3', '6.6.6.6, 203.0.113.13, 10.0.0.5')).toBe('203.0.113.13');
});

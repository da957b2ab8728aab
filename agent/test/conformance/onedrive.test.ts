import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ConnectionSettings } from '@xfer/shared';
import { OnedriveConnector } from '../../src/connectors/onedrive/onedrive.connector.js';
import { FRAGMENT_BYTES } from '../../src/connectors/onedrive/onedrive.upload.js';
import type { ConnectorContext } from '../../src/connectors/types.js';
import { runConformance } from './conformance.suite.js';
import { bodyOf, closedPort, collect, expectCode, randomBody, readAll, sha256, uniqueName } from './helpers.js';
import { RawOnedrive } from './onedrive.raw.js';
import { graphFakeControl } from '../../../e2e/src/fakes/graph/graph-fake.control.js';

// The Microsoft Graph FAKE of `npm run services` (e2e/src/services/graph-fake.service.ts), started
// by jest's global setup: no OneDrive emulator exists, so a fake written from Microsoft's docs.
const env = process.env;
const host = env.XFER_TEST_ONEDRIVE_HOST!;
const port = Number(env.XFER_TEST_ONEDRIVE_PORT);
const root = env.XFER_TEST_ONEDRIVE_ROOT!;
// The fake's self-signed certificate, trusted explicitly (TLS is verified; there is no switch to turn that off).
const ca = readFileSync(env.XFER_TEST_ONEDRIVE_CA_FILE!);
const MiB = 1024 * 1024;

let ids = 0;
/** A connection id of its own per connector family: the token cache is shared per connection id. */
const connectionId = () => `0000000000000000000${String(++ids).padStart(5, '0')}`;

function settings(base: string, over: Partial<ConnectionSettings> = {}, credentials: Record<string, string> = {}, id = connectionId()): ConnectionSettings {
  return {
    id, name: 'onedrive conformance', type: 'onedrive', host, port, path: base,
    options: { login_host: `${host}:${port}` }, agent_id: null,
    credentials: {
      client_id: env.XFER_TEST_ONEDRIVE_CLIENT_ID!, client_secret: env.XFER_TEST_ONEDRIVE_CLIENT_SECRET!,
      tenant_id: env.XFER_TEST_ONEDRIVE_TENANT!, refresh_token: env.XFER_TEST_ONEDRIVE_REFRESH_TOKEN!, ...credentials,
    },
    ...over,
  };
}


/** The shared fake's test controls (`/_fake/*`). */
const fake = <T = unknown>(method: string, what: string, body?: unknown) => graphFakeControl<T>({ host, port, ca }, method, what, body);

interface FakeStats {
  grants: number;
  throttled: number;
  fragments: number;
  open_upload_sessions: number;
}

runConformance('onedrive (Microsoft Graph FAKE), base path with a space', async () => {
  const base = `/${uniqueName('conformance')}/with space`;
  const raw = new RawOnedrive(join(root, ...base.split('/').filter(Boolean)));
  await raw.mkdirs();
  const closed = await closedPort();
  const id = connectionId();
  const make = (over: Partial<ConnectionSettings> = {}, credentials: Record<string, string> = {}) => () => new OnedriveConnector(settings(base, over, credentials), { ca });
  return {
    connector: () => new OnedriveConnector(settings(base, {}, {}, id), { ca }),
    raw: Object.assign(raw, {
      openUploads: async () => (await fake<FakeStats>('GET', `stats?under=${encodeURIComponent(base.slice(1))}`)).open_upload_sessions,
    }),
    failures: [
      { name: 'unknown host', connector: make({ host: 'no-such-host.invalid', options: { login_host: 'no-such-host.invalid' } }), code: 'TRANSIENT', message: /no-such-host\.invalid:443: cannot resolve the host name/ },
      { name: 'wrong port', connector: make({ port: closed, options: { login_host: `${host}:${closed}` } }), code: 'TRANSIENT', message: new RegExp(`127\\.0\\.0\\.1:${closed}: connection refused`) },
      { name: 'wrong client secret', connector: make({}, { client_secret: 'not-the-secret' }), code: 'AUTH', message: /client id or client secret is not accepted \(invalid_client: AADSTS7000215/ },
      { name: 'revoked refresh token', connector: make({}, { refresh_token: 'revoked-or-never-issued' }), code: 'AUTH', message: /refresh token is expired, revoked.*invalid_grant/ },
      { name: 'unknown tenant', connector: make({}, { tenant_id: 'no-such-tenant' }), code: 'AUTH', message: /tenant does not exist/ },
      { name: 'missing base path', connector: () => new OnedriveConnector(settings(`${base}/missing`), { ca }), code: 'NOT_FOUND', message: /base path .*\/missing does not exist/ },
      { name: 'certificate not trusted', connector: () => new OnedriveConnector(settings(base)), code: 'TRANSIENT', message: /self-signed certificate/ },
    ],
    unreachable: make({ port: closed, options: { login_host: `${host}:${closed}` } }),
    listPastOnePage: true,
    // PATCH fileSystemInfo.lastModifiedDateTime: Graph keeps whole seconds.
    modTime: 'set',
    // Unknown length: spooled, then an upload session of 3 fragments.
    largeBytes: 24 * MiB,
    largeStoreVerified: 'quickxorhash',
    cleanup: () => raw.destroy(),
  };
});

describe('onedrive connector (Microsoft Graph FAKE)', () => {
  const base = `/${uniqueName('onedrive')}`;
  const raw = new RawOnedrive(join(root, base.slice(1)));
  const opened: OnedriveConnector[] = [];
  const open = (s: ConnectionSettings = settings(base), context?: ConnectorContext) => {
    const c = new OnedriveConnector(s, { ca, context });
    opened.push(c);
    return c;
  };
  beforeAll(() => raw.mkdirs());
  afterAll(async () => {
    await Promise.all(opened.map((c) => c.close()));
    await fake('DELETE', 'faults');
    await raw.destroy();
  });

  it('writes 21 MiB of known size through an upload session in 320 KiB-multiple fragments, byte-identical and verified by QuickXorHash', async () => {
    const c = open();
    const bytes = 21 * MiB + 12_345;
    const before = await fake<FakeStats>('GET', 'stats');
    const { body, sha256: produced } = randomBody(bytes);
    const result = await c.write('big/session.bin', body, { size: bytes });
    expect(result).toEqual({ size: bytes, checksum: { algorithm: 'quickxor', value: expect.stringMatching(/^[0-9a-f]{40}$/) }, storeVerified: 'quickxorhash' });
    // The same QuickXorHash in a listing and a stat (docs/connectors.md "Checksums").
    const listed = (await collect(c.list('big', { recursive: false }))).find((e) => e.path === 'big/session.bin');
    expect([listed?.checksum, (await c.stat('big/session.bin'))?.checksum]).toEqual([result.checksum, result.checksum]);
    expect(await raw.sha256('big/session.bin')).toBe(produced());
    const after = await fake<FakeStats>('GET', `stats?under=${base.slice(1)}`);
    expect(FRAGMENT_BYTES % (320 * 1024)).toBe(0);
    expect(after.fragments - before.fragments).toBeGreaterThanOrEqual(Math.ceil(bytes / FRAGMENT_BYTES));
    expect(after.open_upload_sessions).toBe(0);
  });

  it('a source shorter than its announced size fails TRANSIENT and leaves nothing', async () => {
    const c = open();
    const { body } = randomBody(6 * MiB);
    await expectCode(c.write('big/short.bin', body, { size: 12 * MiB }), 'TRANSIENT', /not the 12582912 announced/);
    expect(await raw.sha256('big/short.bin')).toBeNull();
    expect((await fake<FakeStats>('GET', `stats?under=${base.slice(1)}`)).open_upload_sessions).toBe(0);
  });

  it('honours Retry-After on 429 and 503 (seconds and HTTP date), then succeeds', async () => {
    const c = open();
    await raw.put('throttled.txt', Buffer.from('patience'));
    await c.stat('throttled.txt');
    const before = await fake<FakeStats>('GET', 'stats');
    // First a 503 until an HTTP date (whole seconds: 2 to 3 s away), then a 429 for 1 s.
    await fake('POST', 'faults', { status: 503, count: 1, retryAfter: new Date(Date.now() + 3000).toUTCString(), match: `${base.slice(1)}/throttled.txt` });
    await fake('POST', 'faults', { status: 429, count: 1, retryAfter: 1, match: `${base.slice(1)}/throttled.txt` });
    const started = Date.now();
    expect(await c.stat('throttled.txt')).toMatchObject({ kind: 'file', size: 8 });
    const elapsed = Date.now() - started;
    // Loosely: both waits happened, and nothing much longer than asked.
    expect(elapsed).toBeGreaterThanOrEqual(2500);
    expect(elapsed).toBeLessThan(15_000);
    expect((await fake<FakeStats>('GET', 'stats')).throttled - before.throttled).toBe(2);
  });

  it('gives up TRANSIENT after a bounded number of throttled attempts', async () => {
    const c = open();
    await raw.put('always-throttled.txt', Buffer.from('x'));
    await fake('POST', 'faults', { status: 429, count: 50, retryAfter: 0, match: `${base.slice(1)}/always-throttled.txt` });
    await expectCode(c.stat('always-throttled.txt'), 'TRANSIENT', /throttled by Microsoft Graph \(HTTP 429, activityLimitReached/);
    await fake('DELETE', 'faults');
  });

  it('gets a new access token once when Graph refuses the cached one (401)', async () => {
    const c = open();
    await c.test();
    const before = await fake<FakeStats>('GET', 'stats');
    await fake('POST', 'revoke-access-tokens');
    await expect(c.test()).resolves.toMatch(/accepted the credentials/);
    expect((await fake<FakeStats>('GET', 'stats')).grants - before.grants).toBe(1);
  });

  it('reports the rotated refresh token, uses it from then on, and shares it between connectors of one connection', async () => {
    // A refresh token the fake invalidates once spent (as are the ones it rotates to).
    const { refresh_token: first } = await fake<{ refresh_token: string }>('POST', 'refresh-tokens', { single_use: true });
    const reported: Array<Record<string, string>> = [];
    const context: ConnectorContext = { credentialsChanged: (credentials) => reported.push(credentials) };
    const id = connectionId();
    const s = settings(base, {}, { refresh_token: first }, id);
    // Two connectors of one connection at once: one grant between them, not two racing spends of `first`.
    await Promise.all([open(s, context).test(), open(s, context).test()]);
    expect(reported).toHaveLength(1);
    const rotated = reported[0]!.refresh_token!;
    expect(Object.keys(reported[0]!)).toEqual(['refresh_token']);
    expect(rotated).not.toBe(first);
    // The spent token no longer works elsewhere (another connection id, no shared cache)...
    await expectCode(open(settings(base, {}, { refresh_token: first })).test(), 'AUTH', /refresh token is expired, revoked/);
    // ...the rotated one does (and rotates again).
    const reportedAgain: Array<Record<string, string>> = [];
    await open(settings(base, {}, { refresh_token: rotated }), { credentialsChanged: (x) => reportedAgain.push(x) }).test();
    expect(reportedAgain[0]?.refresh_token).toEqual(expect.any(String));
    // A connector of the first connection built from the old settings still works: the cache holds the newest token.
    await expect(open(s, context).test()).resolves.toMatch(/accepted/);
  });

  it('reads through the pre-authenticated download URL without sending the access token there', async () => {
    // The fake refuses an Authorization header on download URLs; a whole read and a range pass.
    const c = open();
    const data = Buffer.from('0123456789abcdef');
    await raw.put('download.bin', data);
    expect((await readAll(await c.read('download.bin'))).equals(data)).toBe(true);
    expect((await readAll(await c.read('download.bin', { start: 3, end: 5 }))).toString()).toBe('345');
  });

  it('a simple upload over a file renamed onto another replaces it; folders in the way are CONFLICT', async () => {
    const c = open();
    await c.write('swap/a.txt', bodyOf('new'), {});
    await raw.put('swap/dir/inner.txt', Buffer.from('x'));
    await expectCode(c.write('swap/dir', bodyOf('file over folder'), {}), 'CONFLICT');
    expect(await raw.sha256('swap/a.txt')).toBe(sha256('new'));
  });

  it('a base path that is a file is CONFLICT', async () => {
    await raw.put('plain.txt', Buffer.from('x'));
    await expectCode(open(settings(`${base}/plain.txt`)).test(), 'CONFLICT', /is a file, not a folder/);
  });
});

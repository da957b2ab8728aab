import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type { ConnectionSettings } from '@xfer/shared';
import { GraphFake } from '../../e2e/src/fakes/graph/graph-fake.js';
import { graphFakeControl } from '../../e2e/src/fakes/graph/graph-fake.control.js';
import { AgentAccess } from '../src/connectors/access.js';
import { OnedriveConnector } from '../src/connectors/onedrive/onedrive.connector.js';
import { ConnectorError, type Connector, type ServerCopyOptions } from '../src/connectors/types.js';
import { parseTempName } from '../src/copy/leftovers.js';
import { bodyOf, randomBody } from './conformance/helpers.js';
import { copyAll } from './helpers/tree.js';
import { tempPathFor } from '../src/copy/write-side.js';
import { until } from './helpers/until.js';

/**
 * Server-side copies with Graph's `copy` action (docs/connectors.md "Server-side copies") against a
 * Microsoft Graph FAKE of this file's own (e2e/src/fakes/graph/graph-fake.ts, in this process): the
 * shared fake of the test services may be an older build, and this one's copy faults and monitor
 * origin must not reach other tests. What the client asked comes from the fake's request log; what
 * the agent read or wrote, from counters on the connectors' own read and write (a wrapper would hide
 * the connector's class, and with it the server-side copy).
 */
const MiB = 1024 * 1024;
/** Over the connector's 4 MiB simple-upload limit: written by an upload session, copied by Graph all the same. */
const BIG = 5 * MiB + 12_345;
const MTIME = new Date('2024-05-06T07:08:09.000Z');
const CONNECTION = '0000000000000000000c0p1e';

let dir: string;
let fake: GraphFake;
let port: number;
let ca: string;
/** This file's fake's test controls (`/_fake/*`). */
const control = <T = unknown>(method: string, what: string, body?: unknown) => graphFakeControl<T>({ host: '127.0.0.1', port, ca }, method, what, body);
let app: { tenant: string; clientId: string; clientSecret: string; initialRefreshToken: string };
const drive = () => join(dir, 'drive');
const opened: Connector[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'graph-copy-'));
  await mkdir(join(dir, 'staging'));
  // Each test's base folder (a connection's base path must exist).
  for (const base of ['from', 'to/copy', 'to/moved', 'to/stale', 'to/refused', 'to/faults']) await mkdir(join(dir, 'drive', base), { recursive: true });
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=Microsoft Graph FAKE', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`openssl req failed: ${made.stderr}`);
  ca = await readFile(join(dir, 'cert.pem'), 'utf8');
  app = { tenant: `copy-tenant-${randomBytes(4).toString('hex')}`, clientId: `copy-client-${randomBytes(4).toString('hex')}`, clientSecret: randomBytes(24).toString('base64url'), initialRefreshToken: `0.FAKE.${randomBytes(48).toString('base64url')}` };
  fake = new GraphFake({ app, root: drive(), stagingDir: join(dir, 'staging'), cert: ca, key: await readFile(join(dir, 'key.pem'), 'utf8') });
  port = await fake.listen(0);

  const writer = connector('/from');
  await writer.write('small.txt', bodyOf('a small file\n'), { size: 13, modifiedAt: MTIME });
  await writer.write('empty.txt', bodyOf(''), { size: 0, modifiedAt: MTIME });
  await writer.write('dir/big.bin', randomBody(BIG).body, { size: BIG, modifiedAt: MTIME });
});

afterAll(async () => {
  await Promise.all(opened.map((c) => c.close()));
  await fake?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

function settings(path: string, credentials: Record<string, string> = {}, id = CONNECTION): ConnectionSettings {
  return {
    id, name: 'onedrive server copy', type: 'onedrive', host: '127.0.0.1', port, path,
    options: { login_host: `127.0.0.1:${port}` }, agent_id: null,
    credentials: { client_id: app.clientId, client_secret: app.clientSecret, tenant_id: app.tenant, refresh_token: app.initialRefreshToken, ...credentials },
  };
}

function connector(path: string, credentials: Record<string, string> = {}, id = CONNECTION, access?: AgentAccess): OnedriveConnector {
  const c = new OnedriveConnector(settings(path, credentials, id), { ca, ...(access ? { context: { access } } : {}) });
  opened.push(c);
  return c;
}

/** `c` with counters on its own read and write: the bytes the agent moved through it. */
function counted(c: OnedriveConnector): OnedriveConnector & { bytesRead: () => number; bytesWritten: () => number } {
  let read = 0;
  let written = 0;
  const innerRead = c.read.bind(c);
  const innerWrite = c.write.bind(c);
  c.read = async (path, opts) => {
    const stream = await innerRead(path, opts);
    stream.on('data', (chunk: Buffer) => { read += chunk.length; });
    return stream;
  };
  c.write = (path, body: Readable, opts) => {
    body.on('data', (chunk: Buffer) => { written += chunk.length; });
    return innerWrite(path, body, opts);
  };
  return Object.assign(c, { bytesRead: () => read, bytesWritten: () => written });
}


interface Logged { method: string; path: string; authorization: boolean }
const lastRequest = async () => (await control<{ last: number }>('GET', 'requests')).last;
const requestsSince = async (seq: number) => (await control<{ requests: Logged[] }>('GET', `requests?since=${seq}`)).requests;
/** Requests that carry a file's bytes: a download, content up or down, an upload session and its fragments. */
const moving = (r: Logged) => /^\/_download\/|^\/_upload\/|\/content$|\/createUploadSession$/.test(r.path);

async function sha256(path: string): Promise<string | null> {
  if (!(await stat(path).then((s) => s.isFile(), () => false))) return null;
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Names in a folder of the drive (on disk), every level. */
async function namesIn(rel: string): Promise<string[]> {
  return (await readdir(join(drive(), rel), { recursive: true }).catch(() => [] as string[])).sort();
}

const run = (source: Connector, destination: Connector) => copyAll(source, destination);


/** What the engine hands a copy of `path`: its listed entry, and a fresh temporary name each time it is read (each attempt of the engine has its own). */
async function listed(source: OnedriveConnector, path: string): Promise<ServerCopyOptions> {
  const entry = (await source.stat(path))!;
  return {
    entry,
    get tempPath() {
      return tempPathFor(path);
    },
  };
}

test('same drive and credentials: Graph copies every file, verified by its QuickXorHash, the kept time set; not one byte through the agent', async () => {
  const since = await lastRequest();
  const source = counted(connector('/from'));
  const destination = counted(connector('/to/copy'));
  const outcome = await run(source, destination);
  expect(outcome.status).toBe('completed');
  expect(outcome.files.map((f) => [f.path, f.status, f.verified_by])).toEqual([
    ['dir/big.bin', 'copied', 'server-copy-quickxorhash'], ['empty.txt', 'copied', 'server-copy-quickxorhash'], ['small.txt', 'copied', 'server-copy-quickxorhash'],
  ]);
  // Counted as done, although Graph moved them; the agent's own counters saw nothing.
  expect(outcome.counters.bytes_transferred).toBe(BIG + 13);
  expect([source.bytesRead(), destination.bytesWritten()]).toEqual([0, 0]);
  for (const path of ['small.txt', 'empty.txt', 'dir/big.bin']) {
    expect(await sha256(join(drive(), 'to/copy', path))).toBe(await sha256(join(drive(), 'from', path)));
    const [copy, original] = await Promise.all([destination.stat(path), source.stat(path)]);
    expect(copy).toMatchObject({ size: original!.size, checksum: original!.checksum, modifiedAt: MTIME });
  }
  // Nothing but the copies: no temporary name left.
  expect(await namesIn('to/copy')).toEqual(['dir', 'dir/big.bin', 'empty.txt', 'small.txt']);
  const asked = await requestsSince(since);
  expect(asked.filter(moving)).toEqual([]);
  expect(asked.filter((r) => r.method === 'POST' && r.path.endsWith('/copy'))).toHaveLength(3);
  const polls = asked.filter((r) => r.path.startsWith('/_monitor/'));
  // Each copy polled until done (the first poll always says inProgress); never with the access token.
  expect(polls.length).toBeGreaterThanOrEqual(6);
  expect(polls.filter((r) => r.authorization)).toEqual([]);
}, 60_000);

test('another account, a source rewritten since it was listed, a listing without a hash: no copy by Graph', async () => {
  // Another refresh token is another sign-in: not provably the same authority, so the bytes move.
  const { refresh_token: other } = await control<{ refresh_token: string }>('POST', 'refresh-tokens', {});
  const since = await lastRequest();
  const source = counted(connector('/from'));
  const destination = connector('/to/moved', { refresh_token: other }, '0000000000000000000c0p2e');
  const outcome = await run(source, destination);
  expect(outcome.status).toBe('completed');
  expect(outcome.files.map((f) => f.verified_by)).not.toContain('server-copy-quickxorhash');
  expect(source.bytesRead()).toBe(BIG + 13);
  const asked = await requestsSince(since);
  expect(asked.filter((r) => r.path.endsWith('/copy') || r.path.startsWith('/_monitor/'))).toEqual([]);
  expect(asked.filter((r) => r.path.startsWith('/_download/')).length).toBeGreaterThanOrEqual(2);
  expect(await sha256(join(drive(), 'to/moved/dir/big.bin'))).toBe(await sha256(join(drive(), 'from/dir/big.bin')));

  const same = connector('/from');
  const target = connector('/to/stale');
  const small = await listed(same, 'small.txt');
  expect(await target.copyFrom(same, 'small.txt', 'x.txt', { entry: { ...small.entry, checksum: undefined }, tempPath: tempPathFor('x.txt') })).toBeNull();
  expect(await target.copyFrom(destination, 'small.txt', 'x.txt', small)).toBeNull();
  // Same size, other bytes: Graph's copy names no version, the hashes tell.
  // (A new mtime: the fake caches a file's hash by inode, size and mtime, as a drive's change tracking would see the write.)
  await writeFile(join(drive(), 'from/small.txt'), 'A small file\n');
  try {
    const refused = await target.copyFrom(same, 'small.txt', 'stale.txt', small).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConnectorError);
    expect(refused).toMatchObject({ code: 'CONFLICT', message: expect.stringMatching(/source changed since it was listed/) });
    expect(await namesIn('to/stale')).toEqual([]);
  } finally {
    await writeFile(join(drive(), 'from/small.txt'), 'a small file\n');
    await utimes(join(drive(), 'from/small.txt'), MTIME, MTIME);
  }
}, 60_000);

test('a monitor URL the agent may not dial, or not HTTPS, is not followed: the file fails with a clear error, the target untouched', async () => {
  const source = connector('/from');
  // The agent's owner denies localhost: the monitor URL points there, Graph itself is 127.0.0.1.
  const destination = connector('/to/refused', {}, CONNECTION, new AgentAccess({ allowRoots: [], allowHosts: [], denyHosts: ['localhost'] }));
  const small = await listed(source, 'small.txt');
  try {
    await control('POST', 'monitor-origin', { origin: `https://localhost:${port}` });
    const since = await lastRequest();
    const refused = await destination.copyFrom(source, 'small.txt', 'small.txt', small).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConnectorError);
    expect(refused).toMatchObject({
      code: 'PERMISSION',
      message: expect.stringMatching(/copy "small\.txt".*not following the monitor URL of Microsoft Graph's copy \(localhost:\d+\): the agent may not connect to localhost: .*deny/),
    });
    expect((await requestsSince(since)).filter((r) => r.path.startsWith('/_monitor/'))).toEqual([]);
    // In a job: each file fails at once with that reason (PERMISSION is not retried), none copied.
    const outcome = await run(source, destination);
    expect(outcome.status).toBe('failed');
    expect(outcome.files.map((f) => [f.path, f.status, f.error])).toEqual(['dir/big.bin', 'empty.txt', 'small.txt'].map((path) => [
      path, 'failed', expect.stringMatching(/not following the monitor URL of Microsoft Graph's copy \(localhost:\d+\): the agent may not connect to localhost/),
    ]));
    expect((await requestsSince(since)).filter((r) => r.path.startsWith('/_monitor/') || (r.method === 'POST' && r.path.endsWith('/copy')))).toHaveLength(4);

    await control('POST', 'monitor-origin', { origin: `http://127.0.0.1:${port}` });
    const plain = await destination.copyFrom(source, 'small.txt', 'small.txt', small).catch((e: unknown) => e);
    expect(plain).toMatchObject({ code: 'PERMISSION', message: expect.stringMatching(/monitor URL Microsoft Graph answered is not HTTPS \(http:\); not following it/) });
  } finally {
    await control('POST', 'monitor-origin', {});
  }
  // The target never appeared; what Graph may still finish has the engine's temporary name, which the leftovers sweep knows.
  const left = await namesIn('to/refused');
  expect(left).not.toContain('small.txt');
  for (const name of left.filter((n) => n !== 'dir')) expect([name, parseTempName(name.slice(name.lastIndexOf('/') + 1))]).toEqual([name, expect.anything()]);
}, 60_000);

test('a copy Graph reports failed, or whose bytes differ from the listing, leaves nothing behind and fails with a clear error', async () => {
  const source = connector('/from');
  const destination = connector('/to/faults');
  const big = await listed(source, 'dir/big.bin');
  // The failing copy leaves half the file under its (temporary) name: the connector removes it.
  await control('POST', 'copy-faults', { mode: 'fail', count: 1 });
  const failed = await destination.copyFrom(source, 'dir/big.bin', 'big.bin', big).catch((e: unknown) => e);
  expect(failed).toBeInstanceOf(ConnectorError);
  expect(failed).toMatchObject({ code: 'TRANSIENT', message: expect.stringMatching(/copy "big\.bin".*Microsoft Graph's copy failed \(generalException: The copy failed part-way/) });
  expect(await namesIn('to/faults')).toEqual([]);

  await control('POST', 'copy-faults', { mode: 'corrupt', count: 1 });
  const corrupt = await destination.copyFrom(source, 'dir/big.bin', 'big.bin', big).catch((e: unknown) => e);
  expect(corrupt).toMatchObject({ code: 'TRANSIENT', message: expect.stringMatching(new RegExp(`the copy Microsoft Graph made differs from the listed source \\(${BIG} bytes of ${BIG}, QuickXorHash different\\); the copy was removed`)) });
  expect(await namesIn('to/faults')).toEqual([]);

  // A target already there is replaced by the verified copy only (the rename), as a write's.
  await destination.write('big.bin', bodyOf('an older version\n'), { size: 17 });
  await expect(destination.copyFrom(source, 'dir/big.bin', 'big.bin', big)).resolves.toEqual({ size: BIG, checksum: big.entry.checksum, storeVerified: 'server-copy-quickxorhash' });
  expect(await sha256(join(drive(), 'to/faults/big.bin'))).toBe(await sha256(join(drive(), 'from/dir/big.bin')));
  expect(await namesIn('to/faults')).toEqual(['big.bin']);
}, 60_000);

test('a cancel while Graph copies stops the polling at once and removes what the copy made', async () => {
  const source = connector('/from');
  const destination = connector('/to/cancelled');
  await mkdir(join(drive(), 'to/cancelled'), { recursive: true });
  const big = await listed(source, 'dir/big.bin');
  const since = await lastRequest();
  const cancel = new AbortController();
  const copying = destination.copyFrom(source, 'dir/big.bin', 'big.bin', { entry: big.entry, tempPath: tempPathFor('big.bin'), signal: cancel.signal }).catch((e: unknown) => e);
  // The first poll says inProgress: the connector is now waiting for the next one.
  await until('the first poll of the monitor', async () => (await requestsSince(since)).some((r) => r.path.startsWith('/_monitor/')));
  cancel.abort();
  expect(await copying).toMatchObject({ code: 'TRANSIENT', message: expect.stringMatching(/copy "big\.bin".*aborted/) });
  const asked = await requestsSince(since);
  expect(asked.filter((r) => r.path.startsWith('/_monitor/'))).toHaveLength(1);
  // The clean-up (after the cancel, without its signal) deleted the copy's temporary item.
  expect(asked.at(-1)).toMatchObject({ method: 'DELETE', path: expect.stringMatching(/\.big\.bin\.xfer-t[0-9a-z]+-[0-9a-f]{12}\.part:$/) });
  expect(await namesIn('to/cancelled')).not.toContain('big.bin');
}, 60_000);

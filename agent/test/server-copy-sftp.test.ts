import { readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import type { ConnectionSettings } from '@xfer/shared';
import { SftpConnector } from '../src/connectors/sftp/sftp.connector.js';
import type { SftpTuning } from '../src/connectors/sftp/sftp.config.js';
import type { Connector } from '../src/connectors/types.js';
import { parseTempName, runTag } from '../src/copy/leftovers.js';
import { tempPathFor } from '../src/copy/write-side.js';
import { bodyOf, closedPort, expectCode, randomBody, uniqueName } from './conformance/helpers.js';
import { RawSftp, sftpTestServer } from './conformance/sftp.raw.js';
import { copyAll, fsConnector, rmTemp, sha256, tempDir } from './helpers/tree.js';

/**
 * Server-side copies over sftp (docs/connectors.md "Server-side copies") on the test OpenSSH sshd,
 * whose root is a local directory: what was copied is compared on disk. That no byte went through
 * the agent is shown by counting wrappers around the connectors' `read` and `write` and by the
 * bytes the agent's SSH sockets carried (the test sshd's internal-sftp logs no requests).
 */
const server = sftpTestServer;

const MiB = 1024 * 1024;
/** copy-data requests of 1 MiB here (64 MiB by default), so a few MiB make several requests. */
const CHUNK = MiB;
/** Four requests, the last a short one: a size that is no multiple of the request size. */
const BIG = 3 * CHUNK + 12_345;
const MTIME = new Date('2024-05-06T07:08:09.000Z');
const password = () => ({ password: server.password });

let base: string;
let raw: RawSftp;
const sums: Record<string, string> = {};

function settings(path: string, credentials: Record<string, string>, over: Partial<ConnectionSettings> = {}): ConnectionSettings {
  return {
    id: '000000000000000000000004', name: 'sftp server copy', type: 'sftp', host: server.host, port: server.port,
    path, options: {}, agent_id: null, credentials: { username: server.username, ...credentials }, ...over,
  };
}

function sftp(dir: string, credentials: Record<string, string> = password(), over: Partial<ConnectionSettings> = {}, tuning: Partial<SftpTuning> = {}): SftpConnector {
  return new SftpConnector(settings(`${base}/${dir}`, credentials, over), { copyDataBytes: CHUNK, ...tuning });
}

beforeAll(async () => {
  base = `${server.root}/${uniqueName('server-copy')}`;
  raw = await RawSftp.connect({ ...server, base });
  await raw.mkdirs('src');
  const writer = sftp('src');
  try {
    await writer.write('small.txt', bodyOf('a small file\n'), { size: 13, modifiedAt: MTIME });
    await writer.write('empty.txt', bodyOf(''), { size: 0, modifiedAt: MTIME });
    const big = randomBody(BIG);
    await writer.write('dir/big.bin', big.body, { size: BIG, modifiedAt: MTIME });
  } finally {
    await writer.close();
  }
  for (const path of ['small.txt', 'empty.txt', 'dir/big.bin']) sums[path] = sha256(readFileSync(`${base}/src/${path}`));
}, 60_000);

afterAll(async () => {
  await raw?.destroy();
  raw?.close();
});

const RUN = { jobId: 'server-copy-sftp', attempt: 1 };

const run = (source: Connector, destination: Connector, verify: 'checksum' | 'size' = 'size') => copyAll(source, destination, { options: { verify }, run: RUN });

/**
 * Counts what goes through the agent: bytes read from `c` and writes to it. The real connector
 * itself, its `read` and `write` wrapped (a wrapper object would not be an sftp connector, and the
 * destination copies only from one).
 */
function counted(c: SftpConnector): SftpConnector & { bytesRead: () => number; writes: () => number } {
  let bytes = 0;
  let writes = 0;
  const read = c.read.bind(c);
  const write = c.write.bind(c);
  c.read = async (path, o) => {
    const stream = await read(path, o);
    stream.on('data', (chunk: Buffer) => (bytes += chunk.length));
    return stream;
  };
  c.write = (path, body, o) => {
    writes++;
    return write(path, body, o);
  };
  return Object.assign(c, { bytesRead: () => bytes, writes: () => writes });
}

/** Bytes the connector's SSH connections carried both ways (ssh2 keeps the socket it was given as `_sock`). */
function traffic(c: SftpConnector): number {
  const links = (c as unknown as { session: { links: Array<{ client: { _sock?: Socket } }> } }).session.links;
  return links.reduce((sum, link) => sum + (link.client._sock?.bytesRead ?? 0) + (link.client._sock?.bytesWritten ?? 0), 0);
}

/** Bytes the connector's SSH connections sent (agent → server) and received. */
function directions(c: SftpConnector): { sent: number; received: number } {
  const links = (c as unknown as { session: { links: Array<{ client: { _sock?: Socket } }> } }).session.links;
  return links.reduce((sum, link) => ({ sent: sum.sent + (link.client._sock?.bytesWritten ?? 0), received: sum.received + (link.client._sock?.bytesRead ?? 0) }), { sent: 0, received: 0 });
}

/** The names in a directory on disk, temporary ones included. */
const namesIn = (dir: string) => readdirSync(`${base}/${dir}`).sort();

test('same server and credentials, verify=size: the server copies every file (copy-data); not one byte goes through the agent; kept times', async () => {
  const source = counted(sftp('src'));
  const destination = counted(sftp('copy'));
  // The temporary names the engine hands the copies: its own, with the run's tag (a killed agent's is the next attempt's to remove).
  const temps: Array<string | undefined> = [];
  const copyFrom = destination.copyFrom.bind(destination);
  destination.copyFrom = (from, fromPath, path, o) => {
    temps.push(o.tempPath);
    return copyFrom(from, fromPath, path, o);
  };
  try {
    const outcome = await run(source, destination);
    expect(outcome.status).toBe('completed');
    expect(outcome.files.map((f) => [f.path, f.status, f.verified_by])).toEqual([
      ['dir/big.bin', 'copied', 'server-copy-size'], ['empty.txt', 'copied', 'server-copy-size'], ['small.txt', 'copied', 'server-copy-size'],
    ]);
    // The engine counts the copied bytes as done; none of them was read or written by the agent.
    expect(outcome.counters.bytes_transferred).toBe(BIG + 13);
    expect(source.bytesRead()).toBe(0);
    expect(destination.writes()).toBe(0);
    // Listing, opens, copy-data requests, fstats and renames: a few KiB, not the files' 3 MiB.
    expect(traffic(source) + traffic(destination)).toBeLessThan(256 * 1024);
    for (const path of Object.keys(sums)) {
      const copy = `${base}/copy/${path}`;
      expect(sha256(readFileSync(copy))).toBe(sums[path]);
      expect(statSync(copy).mtime).toEqual(MTIME);
    }
    const tagOf = (temp: string | undefined) => {
      const parsed = parseTempName(temp?.split('/').pop() ?? '');
      return parsed && `${parsed.job}a${parsed.attempt}`;
    };
    expect(temps.map(tagOf)).toEqual(Array(3).fill(runTag(RUN)));
    // Renamed into place: no temporary name remains.
    expect(namesIn('copy')).toEqual(['dir', 'empty.txt', 'small.txt']);
    expect(namesIn('copy/dir')).toEqual(['big.bin']);
  } finally {
    await source.close();
    await destination.close();
  }
}, 60_000);

test('verify=checksum: the server copies, then the source and the copy are read back through their handles and compared; nothing is uploaded', async () => {
  const source = counted(sftp('src'));
  const destination = counted(sftp('checked'));
  try {
    const outcome = await run(source, destination, 'checksum');
    expect(outcome.status).toBe('completed');
    expect(outcome.files.map((f) => [f.path, f.status, f.verified_by])).toEqual([
      ['dir/big.bin', 'copied', 'server-copy-reread'], ['empty.txt', 'copied', 'server-copy-reread'], ['small.txt', 'copied', 'server-copy-reread'],
    ]);
    expect(source.bytesRead()).toBe(0);
    expect(destination.writes()).toBe(0);
    // Both files read back (twice the bytes came down), none sent up: the upload a moved copy costs is saved.
    const a = directions(source);
    const b = directions(destination);
    expect(b.received).toBeGreaterThanOrEqual(2 * (BIG + 13));
    expect(a.sent + b.sent).toBeLessThan(256 * 1024);
    for (const path of Object.keys(sums)) expect(sha256(readFileSync(`${base}/checked/${path}`))).toBe(sums[path]);
  } finally {
    await source.close();
    await destination.close();
  }
}, 60_000);

test('other credentials, another port, another store: the bytes move as ever', async () => {
  // The same server and user, logged in with the key instead of the password: another authority.
  const source = counted(sftp('src', { private_key: readFileSync(server.keyFile, 'utf8') }));
  const destination = sftp('moved');
  const local = tempDir('xfer-server-copy-');
  try {
    const outcome = await run(source, destination);
    expect(outcome.status).toBe('completed');
    expect(outcome.files.map((f) => f.verified_by)).not.toContain('server-copy-size');
    expect(source.bytesRead()).toBe(BIG + 13);
    expect(sha256(readFileSync(`${base}/moved/dir/big.bin`))).toBe(sums['dir/big.bin']);

    const entry = (await destination.stat('dir/big.bin'))!;
    const copies = (from: Connector) => destination.copyFrom(from, 'dir/big.bin', 'x.bin', { tempPath: tempPathFor('x.bin'), entry });
    // Null before any request: neither of these connects (nothing listens on that port).
    const otherPort = sftp('src', password(), { port: await closedPort() });
    const pinned = sftp('src', password(), { options: { host_key_sha256: server.hostKey } });
    expect(await copies(otherPort)).toBeNull();
    expect(await copies(pinned)).toBeNull();
    expect(await copies(fsConnector(local))).toBeNull();
    await Promise.all([otherPort.close(), pinned.close()]);
    expect(namesIn('moved')).toEqual(['dir', 'empty.txt', 'small.txt']);
  } finally {
    await source.close();
    await destination.close();
    rmTemp(local);
  }
}, 60_000);

test('only the listed version: a source rewritten since it was listed is not copied; nothing is left behind', async () => {
  const source = sftp('src');
  const destination = sftp('stale');
  await raw.mkdirs('stale');
  let asked = 0;
  const modifiedAt = async () => {
    asked++;
    return MTIME;
  };
  try {
    writeFileSync(`${base}/src/rewritten.txt`, 'the listed version\n');
    const listed = (await source.stat('rewritten.txt'))!;
    // Another size.
    writeFileSync(`${base}/src/rewritten.txt`, 'rewritten after the listing\n');
    await expectCode(destination.copyFrom(source, 'rewritten.txt', 'a.txt', { tempPath: tempPathFor('a.txt'), entry: listed, modifiedAt }), 'CONFLICT', /source changed since it was listed/);
    // The same size, another modification time.
    writeFileSync(`${base}/src/rewritten.txt`, 'THE LISTED VERSION\n');
    utimesSync(`${base}/src/rewritten.txt`, MTIME, MTIME);
    await expectCode(destination.copyFrom(source, 'rewritten.txt', 'b.txt', { tempPath: tempPathFor('b.txt'), entry: listed, modifiedAt }), 'CONFLICT', /source changed since it was listed/);
    expect(asked).toBe(0);
    expect(namesIn('stale')).toEqual([]);
    // The listed version as it now is copies, and the kept time is asked for once.
    const now = (await source.stat('rewritten.txt'))!;
    await expect(destination.copyFrom(source, 'rewritten.txt', 'd.txt', { tempPath: tempPathFor('d.txt'), entry: now, modifiedAt })).resolves.toEqual({ size: now.size, storeVerified: 'server-copy-reread' });
    expect(asked).toBe(1);
    expect(readFileSync(`${base}/stale/d.txt`, 'utf8')).toBe('THE LISTED VERSION\n');
    expect(namesIn('stale')).toEqual(['d.txt']);
    // Nothing outside the source's own base path: refused before any request.
    await expectCode(destination.copyFrom(source, '../copy/small.txt', 'e.txt', { tempPath: tempPathFor('e.txt'), entry: now }), 'PERMISSION');
    // A missing source: NOT_FOUND, and no temporary file.
    await expectCode(destination.copyFrom(source, 'gone.txt', 'f.txt', { tempPath: tempPathFor('f.txt'), entry: now }), 'NOT_FOUND');
    expect(namesIn('stale')).toEqual(['d.txt']);
    // Copied, but the rename fails (a directory is in the way): the temporary copy is removed.
    await raw.mkdirs('stale/blocked/inside');
    await expectCode(destination.copyFrom(source, 'rewritten.txt', 'blocked', { tempPath: tempPathFor('blocked'), entry: now }), 'CONFLICT');
    expect(namesIn('stale')).toEqual(['blocked', 'd.txt']);
    // Cancelled once the copy goes ahead (the kept time is asked just before the temporary file is
    // created, and the signal is checked before each request): TRANSIENT, and the file is removed.
    const cancel = new AbortController();
    const cancelling = async () => {
      cancel.abort();
      return MTIME;
    };
    await expectCode(destination.copyFrom(source, 'rewritten.txt', 'g.txt', { tempPath: tempPathFor('g.txt'), entry: now, modifiedAt: cancelling, signal: cancel.signal }), 'TRANSIENT', /aborted/);
    expect(namesIn('stale')).toEqual(['blocked', 'd.txt']);
  } finally {
    await source.close();
    await destination.close();
  }
}, 60_000);

import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import ssh2, { type SFTPWrapper } from 'ssh2';
import type { ConnectionSettings, FileResult } from '@xfer/shared';
import { DEFAULT_SFTP_TUNING } from '../src/connectors/sftp/sftp.config.js';
import { SftpConnector } from '../src/connectors/sftp/sftp.connector.js';
import { readAt } from '../src/connectors/sftp/sftp.ops.js';
import { readDepth, SSH2_WINDOW_BYTES, widenReceiveWindow } from '../src/connectors/sftp/sftp.window.js';
import { ConnectorError, type RangeReader } from '../src/connectors/types.js';
import { copyTree } from '../src/copy/copy-engine.js';
import { expectCode, readAll, sha256Of, uniqueName } from './conformance/helpers.js';
import { sftpTestServer as server } from './conformance/sftp.raw.js';
import { FAST_RETRIES, fsConnector, options, rmTemp, tempDir } from './helpers/tree.js';

/**
 * sftp far from the agent (docs/connectors.md "sftp", "Long paths"; docs/agent.md "Several streams
 * per file"), on the test OpenSSH sshd: how deep one file's reads go for a round trip, the widened
 * SSH receive window they need, and a multi-stream read opening the file once per stream.
 */
const MiB = 1024 * 1024;
const SIZE = 24 * MiB + 4321;
const data = randomBytes(SIZE);
const sha = createHash('sha256').update(data).digest('hex');
let dir: string;

beforeAll(() => {
  dir = uniqueName('sftp-window');
  mkdirSync(`${server.root}/${dir}`, { recursive: true });
  writeFileSync(`${server.root}/${dir}/big.bin`, data);
});

test('the depth carries readRate over the round trip, between depth requests and maxReadInFlight bytes', () => {
  const t = DEFAULT_SFTP_TUNING;
  expect(readDepth(0, t)).toBe(t.depth); // loopback
  expect(readDepth(5, t)).toBe(t.depth); // 0.8 MB per round trip: the short-path depth carries it
  expect(readDepth(50, t)).toBe(Math.ceil((t.readRate * 0.05) / t.chunkBytes)); // 61 requests, 7.6 MiB
  expect(readDepth(500, t)).toBe(t.maxReadInFlight / t.chunkBytes); // capped: 8 MiB
  expect(readDepth(-1, t)).toBe(t.depth);
});

test('a channel without ssh2\'s internals keeps its window', () => {
  const push = () => true;
  const plain = { push } as unknown as SFTPWrapper;
  expect(widenReceiveWindow(plain, 8 * MiB)).toBe(false);
  expect((plain as unknown as { push: unknown }).push).toBe(push);
});

test('on a real channel the server honours the widened window: 64 reads of 128 KiB at once come back whole', async () => {
  const client = new ssh2.Client();
  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('error', reject);
    client.connect({ host: server.host, port: server.port, username: server.username, password: server.password });
  });
  try {
    const sftp = await new Promise<SFTPWrapper>((resolve, reject) => client.sftp((err, s) => (err ? reject(err) : resolve(s))));
    const channel = sftp as unknown as { incoming: { window: number } };
    expect(channel.incoming.window).toBeLessThanOrEqual(SSH2_WINDOW_BYTES); // ssh2's, less the SFTP version packet
    expect(widenReceiveWindow(sftp, 8 * MiB)).toBe(true);
    expect(channel.incoming.window).toBe(8 * MiB);
    const handle = await new Promise<Buffer>((resolve, reject) => sftp.open(`${server.root}/${dir}/big.bin`, 'r', (err, h) => (err ? reject(err) : resolve(h))));
    // Had the server not taken the adjustment, it would stop after 2 MiB while the window we keep
    // stays above the top-up mark: the reads would never finish.
    const chunk = 128 * 1024;
    let lowest = Infinity;
    const parts: Buffer[] = [];
    for (let offset = 0; offset < SIZE; offset += 64 * chunk) {
      const batch = await Promise.all(Array.from({ length: 64 }, (_, i) => offset + i * chunk).filter((at) => at < SIZE)
        .map(async (at) => {
          const got = await readAt(sftp, handle, Math.min(chunk, SIZE - at), at);
          lowest = Math.min(lowest, channel.incoming.window);
          return got;
        }));
      parts.push(...batch);
    }
    expect(createHash('sha256').update(Buffer.concat(parts)).digest('hex')).toBe(sha);
    // More than ssh2's own 2 MiB was outstanding at once: the window went below 6 MiB.
    expect(lowest).toBeLessThan(8 * MiB - SSH2_WINDOW_BYTES);
    expect(channel.incoming.window).toBeGreaterThan(SSH2_WINDOW_BYTES);
  } finally {
    client.end();
  }
});

const settings = (): ConnectionSettings => ({
  id: '000000000000000000000005', name: 'sftp long paths', type: 'sftp', host: server.host, port: server.port, path: `${server.root}/${dir}`,
  options: {}, agent_id: null, credentials: { username: server.username, password: server.password },
});

test('the connector reads a file through widened channels when its path calls for it', async () => {
  // A readRate no loopback can satisfy: every channel is sized as for a long path (64 requests, 8 MiB).
  const connector = new SftpConnector(settings(), { readRate: 1e15 });
  try {
    expect(await sha256Of(await connector.read('big.bin'))).toBe(sha);
    expect(await sha256Of(await connector.read('big.bin', { start: 5 * MiB + 7, end: SIZE - 1 }))).toBe(createHash('sha256').update(data.subarray(5 * MiB + 7)).digest('hex'));
  } finally {
    await connector.close();
  }
});

test('a range reader reads several ranges through one open file, past the end to the end; closed, it reads no more', async () => {
  const connector = new SftpConnector(settings());
  try {
    const reader = await connector.rangeReader('big.bin');
    const ranges: Array<[number, number]> = [[3 * MiB, 4 * MiB - 1], [0, 99], [SIZE - 10, SIZE + MiB]];
    for (const [start, end] of ranges) {
      expect((await readAll(await reader.read(start, end))).equals(data.subarray(start, Math.min(end, SIZE - 1) + 1))).toBe(true);
    }
    await reader.close();
    await reader.close();
    await expectCode(reader.read(0, 9), 'TRANSIENT', /closed/);
    await expectCode(connector.rangeReader('missing.bin'), 'NOT_FOUND');
  } finally {
    await connector.close();
  }
});

/** The connector with its range readers counted, and one range read made to fail half-way. */
class CountedSftp extends SftpConnector {
  readers = 0;
  reads = 0;
  failAt: number | null = null;

  override async rangeReader(path: string, o?: { signal?: AbortSignal }): Promise<RangeReader> {
    this.readers++;
    const inner = await super.rangeReader(path, o);
    return {
      close: () => inner.close(),
      read: async (start, end, signal) => {
        this.reads++;
        const stream = await inner.read(start, end, signal);
        if (start !== this.failAt) return stream;
        this.failAt = null;
        let passed = 0;
        const breaking = new Transform({
          transform(chunk: Buffer, _enc, done) {
            passed += chunk.length;
            if (passed > MiB / 2) done(new ConnectorError('TRANSIENT', 'read: connection reset (injected)'));
            else done(null, chunk);
          },
        });
        stream.on('error', (err) => breaking.destroy(err));
        breaking.once('close', () => stream.destroy());
        return stream.pipe(breaking);
      },
    };
  }
}

test('a multi-stream copy opens the file once per stream, and once more for a stream whose read failed; byte-identical', async () => {
  const dst = tempDir('xfer-sftp-ms-');
  const source = new CountedSftp(settings());
  source.failAt = 5 * MiB;
  try {
    const files: FileResult[] = [];
    const outcome = await copyTree({
      source, sourcePath: 'big.bin', destination: fsConnector(dst), destinationPath: '/', options: options({ concurrency: 1 }), resume: false,
      signal: new AbortController().signal, observer: { fileDone: (r) => files.push(r) },
      tuning: { ...FAST_RETRIES, multiStream: { cutoffBytes: 2 * MiB, streams: 4, segmentBytes: MiB, budgetBytes: 4 * MiB } },
    });
    expect(outcome.status).toBe('completed');
    expect(files).toEqual([expect.objectContaining({ path: 'big.bin', status: 'copied', sha256: sha })]);
    expect(createHash('sha256').update(readFileSync(join(dst, 'big.bin'))).digest('hex')).toBe(sha);
    // 25 segments (the last a short one), one read again; four streams, one of which opened the file again.
    expect(source.reads).toBe(Math.ceil(SIZE / MiB) + 1);
    expect(source.readers).toBe(4 + 1);
  } finally {
    await source.close();
    rmTemp(dst);
  }
});

import { readFileSync, statSync } from 'node:fs';
import type { ConnectionSettings, ConnectionType } from '@xfer/shared';
import { createS3Connector } from '../src/connectors/s3/s3.connector.js';
import { ConnectorError, type Connector } from '../src/connectors/types.js';
import { bodyOf, randomBody, uniqueName } from './conformance/helpers.js';
import { RawS3 } from './conformance/s3.raw.js';
import { copyAll } from './helpers/tree.js';
import { WrappedConnector } from './helpers/wrapped-connector.js';

/**
 * Server-side copies (docs/connectors.md "Server-side copies") between two buckets of the test
 * versitygw: what the store was asked, and that nothing was read out of the source bucket, comes from
 * the store's own access log (XFER_TEST_S3_ACCESS_LOG); what the agent read where bytes do move, from
 * a counting wrapper around the source connector.
 */
const env = process.env;
const server = { endpoint: env.XFER_TEST_S3_ENDPOINT!, accessKeyId: env.XFER_TEST_S3_ACCESS_KEY!, secretAccessKey: env.XFER_TEST_S3_SECRET_KEY! };
const accessLog = env.XFER_TEST_S3_ACCESS_LOG!;

function settings(path: string, type: ConnectionType = 's3'): ConnectionSettings {
  return {
    id: '000000000000000000000003', name: `${type} server copy`, type, host: env.XFER_TEST_S3_HOST!, port: Number(env.XFER_TEST_S3_PORT), path,
    options: { secure: false }, agent_id: null,
    credentials: { access_key_id: server.accessKeyId, secret_access_key: server.secretAccessKey, region: 'us-east-1' },
  };
}

const MiB = 1024 * 1024;
/** Three parts of the connector's 8 MiB, the last a short one: a size that is no multiple of the part size. */
const BIG = 2 * 8 * MiB + 12_345;
const MTIME = new Date('2024-05-06T07:08:09.000Z');

let from: RawS3;
let to: RawS3;
const sums: Record<string, string> = {};

beforeAll(async () => {
  from = new RawS3(server, uniqueName('copy-from'), '');
  to = new RawS3(server, uniqueName('copy-to'), '');
  await from.createBucket();
  await to.createBucket();
  const writer = createS3Connector(settings(`/${from.bucket}`));
  try {
    await writer.write('small.txt', bodyOf('a small file\n'), { size: 13, modifiedAt: MTIME });
    await writer.write('empty.txt', bodyOf(''), { size: 0, modifiedAt: MTIME });
    const big = randomBody(BIG);
    await writer.write('dir/big.bin', big.body, { size: BIG, modifiedAt: MTIME });
    sums['dir/big.bin'] = big.sha256();
  } finally {
    await writer.close();
  }
  for (const path of ['small.txt', 'empty.txt']) sums[path] = (await from.sha256(path))!;
}, 60_000);

afterAll(async () => {
  await from?.destroy();
  await to?.destroy();
});

const run = (source: Connector, destination: Connector, destinationPath: string) => copyAll(source, destination, { destinationPath });

/** A connector that counts the bytes read through it (a real one underneath). */
function counted(inner: Connector): WrappedConnector & { bytesRead: () => number } {
  const wrapped = new WrappedConnector(inner);
  let bytes = 0;
  wrapped.onRead = (_path, stream) => stream.on('data', (chunk: Buffer) => { bytes += chunk.length; });
  return Object.assign(wrapped, { bytesRead: () => bytes });
}

/** The access log's lines written since `offset` (bytes), as [operation, bucket, key] of each request. */
function requestsSince(offset: number): Array<{ op: string; bucket: string; key: string }> {
  return readFileSync(accessLog).subarray(offset).toString('utf8').split('\n').flatMap((line) => {
    // versitygw's format (S3's server access log): owner bucket [time] ip requester id s3_<operation> key …
    const m = /^\S+ (\S+) \[[^\]]+\] \S+ \S+ \S+ (\S+) (\S+) /.exec(line);
    return m ? [{ bucket: m[1]!, op: m[2]!.replace(/^s3_/, ''), key: m[3]! }] : [];
  });
}

test('same store and account: the store copies every file, verified by its ETag; not one byte is read through the agent', async () => {
  const logStart = statSync(accessLog).size;
  const source = createS3Connector(settings(`/${from.bucket}`));
  const destination = createS3Connector(settings(`/${to.bucket}/copy`));
  try {
    const outcome = await run(source, destination, '/');
    expect(outcome.status).toBe('completed');
    expect(outcome.files.map((f) => [f.path, f.status, f.verified_by])).toEqual([
      ['dir/big.bin', 'copied', 'server-copy-etag'], ['empty.txt', 'copied', 'server-copy-etag'], ['small.txt', 'copied', 'server-copy-etag'],
    ]);
    // Counted as done, although the store moved them.
    expect(outcome.counters.bytes_transferred).toBe(BIG + 13);
    for (const path of Object.keys(sums)) {
      expect(await to.sha256(`copy/${path}`)).toBe(sums[path]);
      const [copy, original] = await Promise.all([destination.stat(path), source.stat(path)]);
      // The multipart copy has the source's own part layout, hence its ETag; the kept time went along.
      expect(copy).toMatchObject({ size: original!.size, etag: original!.etag, modifiedAt: MTIME });
    }
    const asked = requestsSince(logStart);
    expect(asked.filter((r) => r.bucket === from.bucket && r.op === 'GetObject')).toEqual([]);
    const copies = asked.filter((r) => r.bucket === to.bucket && /Copy/.test(r.op)).map((r) => `${r.op} ${r.key}`).sort();
    expect(copies).toEqual(['CopyObject copy/empty.txt', 'CopyObject copy/small.txt', ...Array(3).fill('UploadPartCopy copy/dir/big.bin')]);
  } finally {
    await source.close();
    await destination.close();
  }
}, 60_000);

test('another account or store: the bytes move as ever; a source rewritten since it was listed is not copied', async () => {
  // r2 over the same server signs with the same keys but is another store type: no server-side copy.
  const logStart = statSync(accessLog).size;
  const source = counted(createS3Connector(settings(`/${from.bucket}`, 'r2')));
  const destination = createS3Connector(settings(`/${to.bucket}/moved`));
  try {
    const outcome = await run(source, destination, '/');
    expect(outcome.status).toBe('completed');
    expect(outcome.files.map((f) => f.verified_by)).not.toContain('server-copy-etag');
    expect(source.bytesRead()).toBe(BIG + 13);
    expect(requestsSince(logStart).filter((r) => r.bucket === from.bucket && r.op === 'GetObject').length).toBeGreaterThanOrEqual(3);
    expect(requestsSince(logStart).filter((r) => /Copy/.test(r.op))).toEqual([]);
    expect(await to.sha256('moved/dir/big.bin')).toBe(sums['dir/big.bin']);

    const same = createS3Connector(settings(`/${from.bucket}`));
    const listed = (await same.stat('small.txt'))!;
    await from.put('small.txt', Buffer.from('rewritten after the listing\n'));
    const refused = await destination.copyFrom!(same, 'small.txt', 'stale.txt', { entry: listed }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConnectorError);
    expect(refused).toMatchObject({ code: 'CONFLICT', message: expect.stringMatching(/changed since it was listed/) });
    expect(await to.sha256('moved/stale.txt')).toBeNull();
    // No ETag to verify a copy by: not copied by the store (the engine moves the bytes).
    expect(await destination.copyFrom!(same, 'small.txt', 'x.txt', { entry: { ...listed, etag: undefined } })).toBeNull();
    await same.close();
  } finally {
    await source.close();
    await destination.close();
  }
}, 60_000);

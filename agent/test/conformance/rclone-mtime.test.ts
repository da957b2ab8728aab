import { mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConnectionSettings } from '@xfer/shared';
import { runCommand } from '../../../e2e/src/tools/run-command.js';
import { BlobConnector } from '../../src/connectors/blob/blob.connector.js';
import { S3Connector } from '../../src/connectors/s3/s3.connector.js';
import type { Connector } from '../../src/connectors/types.js';
import { RawBlob } from './blob.raw.js';
import { bodyOf, collect, randomBody, uniqueName } from './helpers.js';
import { RawS3 } from './s3.raw.js';

// The kept modification time of objects is rclone's `mtime` metadata (connectors/mtime-metadata.ts,
// docs/connectors.md "Modification times"): the real rclone reads what xfer wrote, and xfer what
// rclone wrote, on the test servers of `npm run services` (versitygw, Azurite).
const env = process.env;
const MiB = 1024 * 1024;
/** Before 2001 and with milliseconds: no write time of a store can be mistaken for it. */
const KEPT = new Date('1999-03-04T05:06:07.891Z');
const BY_RCLONE = new Date('2003-07-08T09:10:11.123Z');

let rclone: string;
let work: string;

beforeAll(async () => {
  // Started with the test services (e2e/src/services/webdav.service.ts serves WebDAV with it).
  rclone = env.XFER_TEST_RCLONE ?? '';
  if (!rclone) throw new Error('XFER_TEST_RCLONE is not set: start the test services (npm run services -- up), which provide rclone');
  work = await mkdtemp(join(tmpdir(), 'xfer-rclone-mtime-'));
}, 300_000);
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

/** rclone with a remote `x` configured only through the environment (`--config ''`: no rclone.conf is read), times in UTC. */
function run(remote: Record<string, string>, args: string[]): Promise<string> {
  const config = Object.fromEntries(Object.entries(remote).map(([k, v]) => [`RCLONE_CONFIG_X_${k.toUpperCase()}`, v]));
  return runCommand(rclone, ['--config', '', ...args], work, { ...env, ...config, TZ: 'UTC' });
}

/** `rclone lsl` of `path`: name → the modification time rclone reads, as an ISO string to the millisecond. */
async function lsl(remote: Record<string, string>, path: string): Promise<Record<string, string>> {
  const out = await run(remote, ['lsl', `x:${path}`]);
  const times: Record<string, string> = {};
  for (const line of out.split('\n')) {
    const m = /^\s*\d+ (\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})\.(\d{3})\d* (.+)$/.exec(line);
    if (m) times[m[4]!] = `${m[1]}T${m[2]}.${m[3]}Z`;
  }
  return times;
}

/** A local file with `time` as its mtime, uploaded by `rclone copyto` to `path`. */
async function rcloneUpload(remote: Record<string, string>, path: string, time: Date): Promise<void> {
  const local = join(work, uniqueName('local'));
  await writeFile(local, 'written by rclone');
  await utimes(local, time, time);
  await run(remote, ['copyto', local, `x:${path}`]);
}

/** The interop specs for one store: `c` a connector on `/<bucket>`, `remote` rclone's view of the account. */
async function interop(c: Connector, remote: Record<string, string>, bucket: string): Promise<void> {
  await c.write('xfer/small.txt', bodyOf('kept by xfer'), { modifiedAt: KEPT });
  // Past the first part: a multipart upload (S3) or staged blocks (Blob) carry it too.
  await c.write('xfer/large.bin', randomBody(12 * MiB + 3).body, { modifiedAt: KEPT });
  expect(await lsl(remote, `${bucket}/xfer`)).toEqual({ 'small.txt': KEPT.toISOString(), 'large.bin': KEPT.toISOString() });

  await rcloneUpload(remote, `${bucket}/rclone/by-rclone.txt`, BY_RCLONE);
  expect((await c.stat('rclone/by-rclone.txt'))?.modifiedAt?.toISOString()).toBe(BY_RCLONE.toISOString());
}

describe('modification times kept as object metadata, read by the real rclone and back', () => {
  it('s3 (versitygw): rclone lsl shows the time xfer kept; xfer stats the time rclone kept', async () => {
    const bucket = uniqueName('rclone-mtime');
    const raw = new RawS3({ endpoint: env.XFER_TEST_S3_ENDPOINT!, accessKeyId: env.XFER_TEST_S3_ACCESS_KEY!, secretAccessKey: env.XFER_TEST_S3_SECRET_KEY! }, bucket, '');
    await raw.createBucket();
    const settings: ConnectionSettings = {
      id: '000000000000000000000002', name: 'rclone interop', type: 's3', host: env.XFER_TEST_S3_HOST!, port: Number(env.XFER_TEST_S3_PORT), path: `/${bucket}`,
      options: { secure: false }, agent_id: null, credentials: { access_key_id: env.XFER_TEST_S3_ACCESS_KEY!, secret_access_key: env.XFER_TEST_S3_SECRET_KEY!, region: 'us-east-1' },
    };
    const c = new S3Connector(settings, { partBytes: 5 * MiB });
    const remote = {
      type: 's3', provider: 'Other', access_key_id: env.XFER_TEST_S3_ACCESS_KEY!, secret_access_key: env.XFER_TEST_S3_SECRET_KEY!,
      endpoint: env.XFER_TEST_S3_ENDPOINT!, region: 'us-east-1', force_path_style: 'true',
    };
    try {
      await interop(c, remote, bucket);
      // A listing has no metadata: it says so, and stat has the kept time.
      const listed = (await collect(c.list('xfer', { recursive: true }))).find((e) => e.path === 'xfer/small.txt');
      expect(listed?.modifiedAtNeedsStat).toBe(true);
    } finally {
      await c.close();
      await raw.destroy();
    }
  }, 120_000);

  it('blob (Azurite): rclone lsl shows the time xfer kept; xfer lists and stats the time rclone kept', async () => {
    const container = uniqueName('rclone-mtime');
    const raw = new RawBlob(env.XFER_TEST_BLOB_CONNECTION_STRING!, container, '');
    await raw.createContainer();
    const settings: ConnectionSettings = {
      id: '000000000000000000000003', name: 'rclone interop', type: 'blob', host: null, port: 443, path: `/${container}`,
      options: {}, agent_id: null, credentials: { connection_string: env.XFER_TEST_BLOB_CONNECTION_STRING! },
    };
    const c = new BlobConnector(settings);
    const remote = { type: 'azureblob', account: env.XFER_TEST_BLOB_ACCOUNT!, key: env.XFER_TEST_BLOB_KEY!, endpoint: env.XFER_TEST_BLOB_ENDPOINT! };
    try {
      await interop(c, remote, container);
      // List Blobs with include=metadata: the kept time without a stat.
      const listed = (await collect(c.list('rclone', { recursive: true }))).find((e) => e.path === 'rclone/by-rclone.txt');
      expect({ time: listed?.modifiedAt?.toISOString(), needsStat: listed?.modifiedAtNeedsStat }).toEqual({ time: BY_RCLONE.toISOString(), needsStat: undefined });
    } finally {
      await c.close();
      await raw.destroy();
    }
  }, 120_000);
});

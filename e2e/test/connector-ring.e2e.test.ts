import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { BlobServiceClient } from '@azure/storage-blob';
import { startStack, type Stack } from '../src/stack.js';
import { digestDir, s3Client, treeDiff, writeTree, type Digests } from './support/trees.js';

/**
 * Every connection type the agent has so far, as source and as destination, through the real
 * binaries and real servers: a mixed tree (nested and unicode names, an empty file, an empty
 * directory, a 50 MiB file) goes around the ring sftp → ftp (explicit TLS) → webdav → blob → s3 →
 * sftp and comes back byte-identical.
 */
const env = process.env;
const run = randomBytes(4).toString('hex');
const ring = `ring-${run}`;
const sftpDir = join(env.XFER_TEST_SFTP_ROOT!, ring);
let stack: Stack;
let expected: Digests;

const connections: Record<string, Record<string, unknown>> = {
  sftp: {
    type: 'sftp', host: env.XFER_TEST_SFTP_HOST, port: Number(env.XFER_TEST_SFTP_PORT), path: env.XFER_TEST_SFTP_ROOT,
    credentials: { username: env.XFER_TEST_SFTP_USER, password: env.XFER_TEST_SFTP_PASSWORD },
  },
  ftp: {
    type: 'ftp', host: env.XFER_TEST_FTP_HOST, port: Number(env.XFER_TEST_FTP_PORT), path: env.XFER_TEST_FTP_ROOT,
    options: { secure: 'explicit', tls_cert_sha256: env.XFER_TEST_FTP_CERT_SHA256 },
    credentials: { username: env.XFER_TEST_FTP_USER, password: env.XFER_TEST_FTP_PASSWORD },
  },
  webdav: {
    type: 'webdav', host: env.XFER_TEST_WEBDAV_HOST, port: Number(env.XFER_TEST_WEBDAV_PORT), path: '/', options: { secure: false },
    credentials: { username: env.XFER_TEST_WEBDAV_USER, password: env.XFER_TEST_WEBDAV_PASSWORD },
  },
  blob: { type: 'blob', path: `/${ring}`, credentials: { connection_string: env.XFER_TEST_BLOB_CONNECTION_STRING } },
  s3: {
    type: 's3', host: env.XFER_TEST_S3_HOST, port: Number(env.XFER_TEST_S3_PORT), path: `/${ring}`, options: { secure: false, force_path_style: true },
    credentials: { access_key_id: env.XFER_TEST_S3_ACCESS_KEY, secret_access_key: env.XFER_TEST_S3_SECRET_KEY },
  },
};
const ids: Record<string, string> = {};

beforeAll(async () => {
  expected = await writeTree(join(sftpDir, 'src'), { count: 60, bigBytes: 50 * 1024 * 1024 });
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpDir]);
  await s3Client(env).send(new CreateBucketCommand({ Bucket: ring }));
  await BlobServiceClient.fromConnectionString(env.XFER_TEST_BLOB_CONNECTION_STRING!).getContainerClient(ring).create();
  stack = await startStack({ env });
  await stack.startAgent('ring-agent');
  for (const [type, body] of Object.entries(connections)) {
    ids[type] = (await stack.api.data('POST', '/connections', { name: `ring ${type}`, ...body })).id;
  }
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(sftpDir, { recursive: true, force: true });
}, 60_000);

const hops: Array<[from: string, sourcePath: string, to: string, destinationPath: string]> = [
  ['sftp', `/${ring}/src`, 'ftp', `/${ring}`],
  ['ftp', `/${ring}`, 'webdav', `/${ring}`],
  ['webdav', `/${ring}`, 'blob', '/tree'],
  ['blob', '/tree', 's3', '/tree'],
  ['s3', '/tree', 'sftp', `/${ring}/back`],
];

test.each(hops)('%s %s → %s %s', async (from, sourcePath, to, destinationPath) => {
  const job = await stack.api.data('POST', '/transfers', {
    name: `ring ${from} to ${to}`, sourceConnectionId: ids[from], sourcePath, destinationConnectionId: ids[to], destinationPath,
  });
  const done = await stack.api.call('POST', `/transfers/${job.id}/execute`);
  expect(done.body).toMatchObject({ success: true, files_transferred: expected.size });
}, 300_000);

test('the tree is back on sftp byte-identical, empty directory included', async () => {
  const back = await digestDir(join(sftpDir, 'back'));
  expect(treeDiff(expected, back.files)).toEqual([]);
  expect(back.dirs).toContain('empty-dir');
});

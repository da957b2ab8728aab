import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { startStack, type Stack } from '../src/stack.js';
import { sftpAndS3 } from './support/stack-helpers.js';
import { digestBucket, digestDir, s3Client, treeDiff, writeTree, type Digests } from './support/trees.js';

/**
 * The acceptance round trip of the agents issue, with the real binaries (xfer-server, xfer-agent)
 * and real servers (OpenSSH sshd, versitygw): a 500-file tree with nested and unicode names, an
 * empty file, an empty directory and a 200 MiB file goes sftp → s3 and back s3 → sftp, arriving
 * byte-identical, with the job's counters moving during the run and right at the end.
 */
const env = process.env;
const FILES = 500;
const BIG = 200 * 1024 * 1024;

let stack: Stack;
let s3: S3Client;
let expected: Digests;
let expectedBytes = 0;
const run = randomBytes(4).toString('hex');
const bucket = `e2e-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `e2e-${run}`);
const ids = { sftp: '', s3: '' };

beforeAll(async () => {
  expected = await writeTree(join(sftpRoot, 'src'), { count: FILES, bigBytes: BIG });
  // The sftp user writes the copies back here.
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
  expectedBytes = [...expected.keys()].reduce((sum, rel) => sum + Number(spawnSync('stat', ['-c', '%s', join(sftpRoot, 'src', rel)], { encoding: 'utf8' }).stdout), 0);
  s3 = s3Client(env);
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  stack = await startStack({ env });
  await stack.startAgent('e2e-agent');
  Object.assign(ids, await sftpAndS3(stack, 'e2e', sftpRoot, bucket));
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(sftpRoot, { recursive: true, force: true });
}, 60_000);

test('both connections test green through the agent', async () => {
  for (const id of [ids.sftp, ids.s3]) {
    const result = await stack.api.data('POST', `/connections/${id}/test`, undefined, 200);
    expect(result).toMatchObject({ success: true, latency_ms: expect.any(Number) });
  }
}, 60_000);

test('sftp → s3: byte-identical, counters move during the run and are exact at the end', async () => {
  const job = await stack.api.data('POST', '/transfers', {
    name: 'e2e up', sourceConnectionId: ids.sftp, sourcePath: '/src', destinationConnectionId: ids.s3, destinationPath: '/copy',
  });
  expect(job).toMatchObject({ status: 'queued', files_transferred: 0, started_at: null });
  const accepted = await stack.api.call('POST', `/transfers/${job.id}/execute?wait=false`);
  expect(accepted.status).toBe(202);

  const seen: number[] = [];
  let current = accepted.body.data;
  while (current.status === 'queued' || current.status === 'in-progress') {
    seen.push(current.files_transferred);
    await new Promise((r) => setTimeout(r, 100));
    current = await stack.api.data('GET', `/transfers/${job.id}`);
  }
  expect(current).toMatchObject({ status: 'completed', error: null, files_total: FILES, files_transferred: FILES, bytes_transferred: expectedBytes });
  expect(Date.parse(current.completed_at)).toBeGreaterThanOrEqual(Date.parse(current.started_at));
  // Observed strictly between nothing and everything while it ran.
  expect(seen.some((n) => n > 0 && n < FILES)).toBe(true);

  const copied = await digestBucket(s3, bucket, 'copy');
  expect(treeDiff(expected, copied.files)).toEqual([]);
  // The empty directory is kept as a `dir/` marker.
  expect(copied.markers).toContain('empty-dir');
}, 600_000);

test('s3 → sftp: the blocking execute answers the summary; byte-identical, empty dir kept, no temp file left', async () => {
  const job = await stack.api.data('POST', '/transfers', {
    name: 'e2e down', sourceConnectionId: ids.s3, sourcePath: '/copy', destinationConnectionId: ids.sftp, destinationPath: '/back',
  });
  const done = await stack.api.call('POST', `/transfers/${job.id}/execute`);
  expect(done.status).toBe(200);
  expect(done.body).toEqual({ success: true, files_transferred: FILES, bytes_transferred: expectedBytes });
  const back = await digestDir(join(sftpRoot, 'back'));
  expect(treeDiff(expected, back.files)).toEqual([]);
  expect(back.dirs).toContain('empty-dir');
  expect([...back.files.keys()].filter((p) => p.endsWith('.part'))).toEqual([]);

  const final = await stack.api.data('GET', `/transfers/${job.id}`);
  expect(final).toMatchObject({ status: 'completed', files_total: FILES, files_transferred: FILES, bytes_transferred: expectedBytes });
  // Per-file results were recorded for every file.
  let files = 0;
  let cursor: string | null = null;
  do {
    const page: { data: unknown[]; next_cursor: string | null } = (await stack.api.call('GET', `/transfers/${job.id}/files?limit=1000${cursor ? `&cursor=${cursor}` : ''}`)).body;
    files += page.data.length;
    cursor = page.next_cursor;
  } while (cursor);
  expect(files).toBe(FILES);
}, 600_000);

test('a second run with the default overwrite policy skips every unchanged file', async () => {
  const job = await stack.api.data('POST', '/transfers', {
    name: 'e2e again', sourceConnectionId: ids.sftp, sourcePath: '/src', destinationConnectionId: ids.s3, destinationPath: '/copy',
  });
  const done = await stack.api.call('POST', `/transfers/${job.id}/execute`);
  expect(done.body).toMatchObject({ success: true, files_transferred: 0, bytes_transferred: 0 });
  expect(await stack.api.data('GET', `/transfers/${job.id}`)).toMatchObject({ files_total: FILES, files_skipped: FILES });
}, 300_000);

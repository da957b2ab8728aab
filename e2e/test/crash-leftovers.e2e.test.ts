import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { startStack, stopProc, type Stack } from '../src/stack.js';
import { sftpAndS3, unfinished, waitFor } from './support/stack-helpers.js';
import { digestBucket, digestDir, openUploads, s3Client, treeDiff, writeRandomFile, type Digests } from './support/trees.js';

/**
 * Nothing partial is left behind after a crash: kill -9 of the agent while it writes a big file
 * (its temporary `.part` file on sftp, its open multipart upload on s3, seen on the raw servers
 * before the kill), then the run is taken over and runs again on a new agent process: the job
 * completes and the raw servers hold no `.part` file and no open multipart upload.
 */
const env = process.env;
const run = randomBytes(4).toString('hex');
const bucket = `e2e-crash-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `e2e-crash-${run}`);
let stack: Stack;
let s3: S3Client;
const ids = { sftp: '', s3: '', sftpByKey: '' };
let expected: Digests;

beforeAll(async () => {
  s3 = s3Client(env);
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  expected = new Map([['big/huge.bin', await writeRandomFile(join(sftpRoot, 'src', 'big', 'huge.bin'), 300 * 1024 * 1024)]]);
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
  stack = await startStack({ env, serverEnv: { XFER_JOB_LEASE_MS: '4000', XFER_AGENT_HEARTBEAT_MS: '500', XFER_DISPATCH_POLL_MS: '100' } });
  Object.assign(ids, await sftpAndS3(stack, 'crash', sftpRoot, bucket));
  // The sftp destination logs in with the key, the source with the password: not the same
  // credentials, so the bytes go through the agent, whose write leaves a .part to be killed over (between
  // the same credentials the server copies: docs/connectors.md "Server-side copies").
  ids.sftpByKey = (await stack.api.data('POST', '/connections', {
    name: 'crash sftp by key', type: 'sftp', host: env.XFER_TEST_SFTP_HOST, port: Number(env.XFER_TEST_SFTP_PORT), path: sftpRoot,
    credentials: { username: env.XFER_TEST_SFTP_USER, private_key: readFileSync(env.XFER_TEST_SFTP_KEY_FILE!, 'utf8') },
  })).id as string;
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(sftpRoot, { recursive: true, force: true });
}, 60_000);

/** Every `.part` file below `dir` on the raw sftp server's disk. */
function partFiles(dir: string): string[] {
  try {
    return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((p) => p.endsWith('.part'));
  } catch {
    return [];
  }
}

/** Starts the job on a fresh agent, kills the agent once `leftover()` shows its partial write; the next run is on a new agent process. */
async function killAndTakeOver(name: string, destination: string, leftover: () => Promise<boolean>): Promise<void> {
  const agent = await stack.startAgent(`crash-${name}`);
  const created = await stack.api.data('POST', '/transfers', {
    name, sourceConnectionId: ids.sftp, sourcePath: '/src', destinationConnectionId: destination, destinationPath: `/${name}`, options: { concurrency: 1 },
  });
  const id = created.id as string;
  expect((await stack.api.call('POST', `/transfers/${id}/execute?wait=false`)).status).toBe(202);
  const job = () => stack.api.data('GET', `/transfers/${id}`);
  await waitFor('a partial write at the destination', leftover, (seen) => seen, 120_000);
  agent.proc.child.kill('SIGKILL');
  await agent.proc.exited;
  // The partial write outlived its agent: this is what the next run must clean.
  expect(await leftover()).toBe(true);
  // The lease expires: the run is taken over, and waits for an agent as attempt 2.
  expect(await waitFor('the lease to expire', job, (j) => j.status !== 'in-progress', 60_000)).toMatchObject({ status: 'queued', attempt: 2 });

  const again = stack.spawnAgent(agent.token);
  const done = await waitFor('the transfer to end', job, (j) => !unfinished(j), 300_000);
  expect(done).toMatchObject({ status: 'completed', attempt: 2, files_transferred: 1 });
  await stopProc(again);
}

test('sftp destination: the .part file of the killed agent is gone after the takeover', async () => {
  const dest = join(sftpRoot, 'to-sftp');
  await killAndTakeOver('to-sftp', ids.sftpByKey, async () => partFiles(dest).length > 0);
  expect(partFiles(dest)).toEqual([]);
  expect(treeDiff(expected, (await digestDir(dest)).files)).toEqual([]);
}, 600_000);

test('s3 destination: the multipart upload the killed agent left open is aborted by the next run', async () => {
  await killAndTakeOver('to-s3', ids.s3, async () => (await openUploads(s3, bucket)) > 0);
  expect(await openUploads(s3, bucket)).toBe(0);
  expect(treeDiff(expected, (await digestBucket(s3, bucket, 'to-s3')).files)).toEqual([]);
}, 600_000);

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  AbortMultipartUploadCommand, CreateBucketCommand, DeleteBucketCommand, DeleteObjectsCommand, ListMultipartUploadsCommand,
  ListObjectsV2Command, type S3Client,
} from '@aws-sdk/client-s3';
import { startStack, type Api, type Proc, type Stack, type StackOptions } from '../../src/stack.js';
import { FIXTURES } from './connections.js';
import { agentLines, fileResults, unfinished, waitFor, type FileRecord } from './stack-helpers.js';
import { digestBucket, openUploads, s3Client, treeDiff, writeTree, type Digests } from './trees.js';

/**
 * What the relay e2e files share: a stack whose sftp connection names pool `src` and whose s3
 * connection names pool `dst`, so that no agent serves both ends and every run is relayed from a
 * `src` agent to a `dst` agent; a source tree written once on the test sshd (below `/src`), a
 * bucket of the suite's own, and the checks of a finished relayed run.
 */
export const SOURCE_POOL = 'src';
export const DESTINATION_POOL = 'dst';

/**
 * The control plane's settings in these suites. They lose agents by kill -9 (the socket closes at
 * once), never by silence, so the heartbeat stays at 2 s: at 500 ms (3 silent ones: 1.5 s) an
 * agent busy for a second on this loaded 2-core machine was dropped as silent and its relay taken
 * over. A short dispatch poll lets a takeover start at once.
 */
const SERVER_ENV = { XFER_JOB_LEASE_MS: '10000', XFER_AGENT_HEARTBEAT_MS: '2000', XFER_DISPATCH_POLL_MS: '100' };

export interface RelaySuite {
  stack: Stack;
  s3: S3Client;
  bucket: string;
  /** The sftp connection's base directory on the test sshd's disk; the tree is below `src/`. */
  sftpRoot: string;
  /** The pooled connections: sftp in `src`, s3 in `dst`. */
  ids: { sftp: string; s3: string };
  /** The source tree's digests (relative to `/src`). */
  tree: Digests;
}

/**
 * Registers the beforeAll/afterAll of a relay suite: bucket, tree (`count` files, one of
 * `bigBytes`), the stack (`stack` options: instances, more control-plane settings), the pooled
 * connections. afterAll stops the stack and removes the directory and the bucket.
 */
export function relaySuite(name: string, opts: { tree: { count: number; bigBytes: number }; stack?: Omit<StackOptions, 'env'> }): RelaySuite {
  const env = process.env;
  const run = randomBytes(4).toString('hex');
  const dir = `${name}-${run}`;
  const suite = { bucket: dir, sftpRoot: join(env.XFER_TEST_SFTP_ROOT!, dir), ids: { sftp: '', s3: '' } } as RelaySuite;
  beforeAll(async () => {
    suite.s3 = s3Client(env);
    await suite.s3.send(new CreateBucketCommand({ Bucket: suite.bucket }));
    suite.tree = await writeTree(join(suite.sftpRoot, 'src'), opts.tree);
    spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, suite.sftpRoot]);
    suite.stack = await startStack({ env, ...opts.stack, serverEnv: { ...SERVER_ENV, ...opts.stack?.serverEnv } });
    const connection = async (body: Record<string, unknown>) => (await suite.stack.api.data('POST', '/connections', body)).id as string;
    suite.ids.sftp = await connection({ ...FIXTURES.sftp!.body(dir), name: `${name} sftp`, agent_pool: SOURCE_POOL });
    suite.ids.s3 = await connection({ ...FIXTURES.s3!.body(suite.bucket), name: `${name} s3`, agent_pool: DESTINATION_POOL });
  }, 180_000);
  afterAll(async () => {
    await suite.stack?.stop();
    rmSync(suite.sftpRoot, { recursive: true, force: true });
    if (suite.s3) await removeBucket(suite.s3, suite.bucket);
  }, 60_000);
  return suite;
}

/** Creates a transfer of `sourcePath` to `destinationPath` (through `api`) and executes it without waiting; its id. */
export async function startTransfer(api: Api, ids: { sftp: string; s3: string }, name: string, sourcePath: string, destinationPath: string): Promise<string> {
  const created = await api.data('POST', '/transfers', {
    name, sourceConnectionId: ids.sftp, sourcePath, destinationConnectionId: ids.s3, destinationPath, options: { concurrency: 4 },
  });
  const executed = await api.call('POST', `/transfers/${created.id}/execute?wait=false`);
  if (executed.status !== 202) throw new Error(`execute ${created.id}: ${executed.status} ${JSON.stringify(executed.body)}`);
  return created.id as string;
}

/** "LastModified ETag" of every object under `prefix/`, by key relative to it: what a rewrite changes. */
export async function objectHeads(s3: S3Client, bucket: string, prefix: string): Promise<Map<string, string>> {
  const heads = new Map<string, string>();
  let token: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}/`, ContinuationToken: token }));
    for (const o of page.Contents ?? []) heads.set(o.Key!.slice(prefix.length + 1), `${o.LastModified?.toISOString()} ${o.ETag}`);
    token = page.NextContinuationToken;
  } while (token);
  return heads;
}

/**
 * The checks of a relayed run that ended well: `completed` in relay mode, counters that add up
 * (the final attempt's per-file results give them), every copied file verified with the source's
 * SHA-256, the objects under `prefix` byte-identical to `expected`, no multipart upload open in
 * the bucket. Returns the transfer and its final attempt's results.
 */
export async function expectRelayedCopy(suite: RelaySuite, api: Api, id: string, prefix: string, expected: Digests = suite.tree): Promise<{ view: any; results: Map<string, FileRecord> }> {
  const view = await api.data('GET', `/transfers/${id}`);
  expect(view).toMatchObject({ status: 'completed', error: null, mode: 'relay', files_total: expected.size, files_failed: 0 });
  expect(view.files_transferred + view.files_skipped).toBe(view.files_total);
  const results = await fileResults(api, id, view.attempt as number);
  expect(results.size).toBe(expected.size);
  const copied = [...results.values()].filter((f) => f.status === 'copied');
  expect(copied.length).toBe(view.files_transferred);
  expect([...results.values()].filter((f) => f.status === 'skipped').length).toBe(view.files_skipped);
  expect(copied.reduce((sum, f) => sum + f.size, 0)).toBe(view.bytes_transferred);
  for (const f of copied) {
    expect([f.path, f.sha256]).toEqual([f.path, expected.get(f.path)]);
    expect([f.path, f.verified_by]).toEqual([f.path, expect.stringMatching(/^[a-z0-9-]+$/)]);
  }
  expect(treeDiff(expected, (await digestBucket(suite.s3, suite.bucket, prefix)).files)).toEqual([]);
  expect(await openUploads(suite.s3, suite.bucket)).toBe(0);
  return { view, results };
}

/**
 * Waits until a run is well under way: at least 20 files recorded copied and a multipart upload
 * open (the big file in flight). Returns the transfer then (checked in progress by the caller).
 */
export async function midRun(suite: RelaySuite, api: Api, id: string): Promise<any> {
  const seen = await waitFor('files copied and a multipart upload open', async () => ({ job: await api.data('GET', `/transfers/${id}`), uploads: await openUploads(suite.s3, suite.bucket) }),
    (s) => (s.job.files_transferred >= 20 && s.uploads > 0) || !unfinished(s.job), 180_000);
  return seen.job;
}

/** kill -9 of an agent; then, at once, the objects under `prefix` as the killed run left them, and when. */
export async function killAgent(suite: RelaySuite, proc: Proc, prefix: string): Promise<{ heads: Map<string, string>; at: number }> {
  proc.child.kill('SIGKILL');
  await proc.exited;
  const at = Date.now();
  return { heads: await objectHeads(suite.s3, suite.bucket, prefix), at };
}

/**
 * After a takeover, the resume: every file attempt 1 recorded copied (at least 20, not the big
 * one) is `skipped` by attempt 2 with `verified_by: "attempt 1"`, and its object is the one attempt
 * 1 wrote (as `killed` saw it right after the kill, written before it); the big file is copied.
 */
export async function expectResumed(suite: RelaySuite, api: Api, id: string, prefix: string, second: Map<string, FileRecord>, killed: { heads: Map<string, string>; at: number }): Promise<void> {
  const verified = [...(await fileResults(api, id, 1)).values()].filter((f) => f.status === 'copied');
  expect(verified.length).toBeGreaterThanOrEqual(20);
  expect(verified.map((f) => f.path)).not.toContain('big/big.bin');
  const heads = await objectHeads(suite.s3, suite.bucket, prefix);
  for (const f of verified) {
    expect(second.get(f.path)).toMatchObject({ status: 'skipped', verified_by: 'attempt 1', sha256: f.sha256, size: f.size });
    expect([f.path, heads.get(f.path)]).toEqual([f.path, killed.heads.get(f.path)]);
    expect(Date.parse(heads.get(f.path)!.split(' ')[0]!)).toBeLessThanOrEqual(killed.at);
  }
  expect(second.get('big/big.bin')).toMatchObject({ status: 'copied' });
}

/** The digests of the files below `dir/` of a tree, relative to it. */
export function subtree(tree: Digests, dir: string): Digests {
  return new Map([...tree].filter(([path]) => path.startsWith(`${dir}/`)).map(([path, digest]) => [path.slice(dir.length + 1), digest]));
}

/** The agent's "relay source ended" line for a job's attempt, once logged (it served that source side). */
export function sourceEnded(proc: Proc, jobId: string, attempt: number): Record<string, any> | undefined {
  return agentLines(proc).find((l) => l.msg === 'relay source ended' && l.job_id === jobId && l.attempt === attempt);
}

/** Empties and removes a bucket (a test S3 server kept up between runs would otherwise fill its disk); best effort. */
async function removeBucket(s3: S3Client, bucket: string): Promise<void> {
  try {
    const uploads = await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
    for (const u of uploads.Uploads ?? []) await s3.send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: u.Key!, UploadId: u.UploadId! }));
    for (;;) {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, MaxKeys: 1000 }));
      const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key! }));
      if (keys.length === 0) break;
      await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys, Quiet: true } }));
    }
    await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
  } catch (err) {
    process.stderr.write(`could not remove bucket ${bucket}: ${(err as Error).message}\n`);
  }
}

import { chmodSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { HeadObjectCommand } from '@aws-sdk/client-s3';
import { stopProc } from '../src/stack.js';
import { fileResults, sftpAndS3Suite, unfinished, waitFor } from './support/stack-helpers.js';
import { digestBucket, digestDir, openUploads, sha256, treeDiff, writeTree, type Digests } from './support/trees.js';

/**
 * A run after the first resumes from the per-file results the control plane stored (issue 14):
 * with the real binaries, a job killed mid-run (kill -9 of the agent) is taken over once the
 * lease expires, waits for an agent, and its next run on a new agent process copies none of the
 * files attempt 1 recorded verified again, redoes the half-written one, leaves no open multipart
 * upload; and a retry follows `overwrite`: a same-size file at the destination that no attempt
 * wrote is replaced under `always`.
 */
const LEASE_MS = 4000;
const suite = sftpAndS3Suite('e2e-resume', { XFER_JOB_LEASE_MS: String(LEASE_MS), XFER_AGENT_HEARTBEAT_MS: '500', XFER_DISPATCH_POLL_MS: '100' });
const { ids, bucket, sftpRoot, chownToSftpUser } = suite;
const job = (id: string) => suite.stack.api.data('GET', `/transfers/${id}`);

/** Last-Modified and ETag of an object below `prefix/`. */
async function head(prefix: string, path: string): Promise<string> {
  const h = await suite.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: `${prefix}/${path}` }));
  return `${h.LastModified?.toISOString()} ${h.ETag}`;
}

test('kill -9 mid-run, taken over on a new agent process: files attempt 1 verified are not copied again, the half-written one is redone, no open multipart upload', async () => {
  const expected: Digests = await writeTree(join(sftpRoot, 'kill-src'), { count: 400, bigBytes: 300 * 1024 * 1024 });
  chownToSftpUser();
  const agent = await suite.stack.startAgent('resume-kill');
  const created = await suite.stack.api.data('POST', '/transfers', {
    name: 'resume kill', sourceConnectionId: ids.sftp, sourcePath: '/kill-src', destinationConnectionId: ids.s3, destinationPath: '/kill-dst', options: { concurrency: 4 },
  });
  const id = created.id as string;
  expect((await suite.stack.api.call('POST', `/transfers/${id}/execute?wait=false`)).status).toBe(202);
  // Killed while some files are recorded copied and the big file is a multipart upload under way.
  const before = await waitFor('files copied and a multipart upload open', async () => ({ job: await job(id), uploads: await openUploads(suite.s3, bucket) }),
    (s) => (s.job.files_transferred >= 20 && s.uploads > 0) || !unfinished(s.job), 180_000);
  expect(before.job.status).toBe('in-progress');
  agent.proc.child.kill('SIGKILL');
  await agent.proc.exited;
  expect(await openUploads(suite.s3, bucket)).toBeGreaterThan(0);
  // The lease expires: the run is taken over; with no agent online, the transfer waits as attempt 2.
  expect(await waitFor('the lease to expire', () => job(id), (j) => j.status !== 'in-progress', LEASE_MS * 10)).toMatchObject({ status: 'queued', attempt: 2, takeovers: 1 });

  const verified = [...(await fileResults(suite.stack.api, id, 1)).values()].filter((f) => f.status === 'copied');
  expect(verified.length).toBeGreaterThanOrEqual(20);
  expect(verified.map((f) => f.path)).not.toContain('big/big.bin');
  const visibleBefore = (await digestBucket(suite.s3, bucket, 'kill-dst')).files;
  const headsBefore = new Map(await Promise.all(verified.map(async (f) => [f.path, await head('kill-dst', f.path)] as const)));

  // No retry: the agent comes back and the waiting transfer runs again on it.
  const again = suite.stack.spawnAgent(agent.token);
  const final = await waitFor('the transfer to end', () => job(id), (j) => !unfinished(j), 300_000);
  expect(final).toMatchObject({ status: 'completed', attempt: 2, files_total: expected.size, files_failed: 0 });

  const second = await fileResults(suite.stack.api, id, 2);
  expect(second.size).toBe(expected.size);
  // Every file attempt 1 verified: skipped, saying so, the object untouched.
  for (const f of verified) {
    expect(second.get(f.path)).toMatchObject({ status: 'skipped', verified_by: 'attempt 1', sha256: f.sha256, size: f.size });
    expect(await head('kill-dst', f.path)).toBe(headsBefore.get(f.path));
  }
  // The rest copied (the half-written big file among them), except objects complete before the
  // kill whose results had not reached the control plane yet: the policy (if_changed) keeps those.
  const verifiedPaths = new Set(verified.map((f) => f.path));
  for (const [path, r] of second) {
    if (verifiedPaths.has(path)) continue;
    expect([path, r.status]).toEqual([path, visibleBefore.has(path) ? 'skipped' : 'copied']);
  }
  expect(second.get('big/big.bin')).toMatchObject({ status: 'copied', verified_by: expect.any(String) });
  expect(final.files_skipped).toBe(visibleBefore.size);
  expect(final.files_transferred).toBe(expected.size - visibleBefore.size);
  expect(treeDiff(expected, (await digestBucket(suite.s3, bucket, 'kill-dst')).files)).toEqual([]);
  expect(await openUploads(suite.s3, bucket)).toBe(0);
  expect(again.output()).not.toContain('results of earlier attempts are not available');
  await stopProc(again);
}, 600_000);

test('retry with overwrite always: a same-size file at the destination that no attempt wrote is replaced; verified files are not copied again; no temporaries', async () => {
  const src = join(sftpRoot, 'always-src');
  const dst = join(sftpRoot, 'always-dst');
  const expected: Digests = new Map();
  mkdirSync(src, { recursive: true });
  mkdirSync(dst, { recursive: true });
  for (let i = 0; i < 30; i++) {
    const data = Buffer.from(`file ${i} `.repeat(50 + i));
    writeFileSync(join(src, `f${i}.txt`), data);
    expected.set(`f${i}.txt`, sha256(data));
  }
  chownToSftpUser();
  // stale.txt: unreadable for attempt 1 (it fails), and a same-size stale copy sits at the destination.
  const fresh = Buffer.from('fresh content, the source of truth\n');
  writeFileSync(join(src, 'stale.txt'), fresh);
  expected.set('stale.txt', sha256(fresh));
  writeFileSync(join(dst, 'stale.txt'), Buffer.alloc(fresh.length, 'x'));
  chownToSftpUser();
  chmodSync(join(src, 'stale.txt'), 0o000);

  const agent = await suite.stack.startAgent('resume-always');
  const created = await suite.stack.api.data('POST', '/transfers', {
    name: 'resume always', sourceConnectionId: ids.sftp, sourcePath: '/always-src', destinationConnectionId: ids.sftp, destinationPath: '/always-dst',
    options: { overwrite: 'always', concurrency: 4 },
  });
  const id = created.id as string;
  const first = await suite.stack.api.call('POST', `/transfers/${id}/execute`);
  expect(first.body).toMatchObject({ success: false });
  expect(await job(id)).toMatchObject({ status: 'failed', files_transferred: 30, files_failed: 1 });
  const firstResults = await fileResults(suite.stack.api, id, 1);
  expect(firstResults.get('stale.txt')).toMatchObject({ status: 'failed' });

  chmodSync(join(src, 'stale.txt'), 0o644);
  expect((await suite.stack.api.call('POST', `/transfers/${id}/retry`)).status).toBe(200);
  expect((await suite.stack.api.call('POST', `/transfers/${id}/execute`)).body).toMatchObject({ success: true, files_transferred: 1 });
  expect(await job(id)).toMatchObject({ status: 'completed', attempt: 2, files_transferred: 1, files_skipped: 30 });
  const second = await fileResults(suite.stack.api, id, 2);
  // From the sftp connection to itself the server copies (copy-data, docs/connectors.md "Server-side
  // copies"), then source and copy are read back and compared (verify=checksum): no SHA-256 of moved
  // bytes is recorded; the content is compared on disk below.
  expect(second.get('stale.txt')).toMatchObject({ status: 'copied', verified_by: 'server-copy-reread', sha256: null });
  for (let i = 0; i < 30; i++) expect(second.get(`f${i}.txt`)).toMatchObject({ status: 'skipped', verified_by: 'attempt 1', sha256: null });
  expect(treeDiff(expected, (await digestDir(dst)).files)).toEqual([]);
  expect(readdirSync(dst).filter((name) => name.endsWith('.part'))).toEqual([]);
  await stopProc(agent.proc);
}, 300_000);

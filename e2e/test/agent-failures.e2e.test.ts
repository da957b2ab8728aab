import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { stopProc } from '../src/stack.js';
import { sftpAndS3Suite, unfinished, waitFor } from './support/stack-helpers.js';
import { digestBucket, digestDir, openUploads, treeDiff, writeRandomFile, writeTree, type Digests } from './support/trees.js';

/**
 * What happens when things go wrong, with the real binaries: cancel mid-run leaves no partial
 * object or file; with automatic takeovers off (XFER_JOB_MAX_TAKEOVERS=0; takeovers are
 * queue-failover.e2e.test.ts's), an agent killed with SIGKILL loses its job after the lease, and
 * a retry on a restarted agent copies only what was missing; a revoked agent is cut off at once
 * and cannot come back; a wrong token never connects.
 */
const LEASE_MS = 4000;
const suite = sftpAndS3Suite('e2e-fail', {
  XFER_JOB_LEASE_MS: String(LEASE_MS), XFER_AGENT_HEARTBEAT_MS: '500', XFER_DISPATCH_POLL_MS: '100', XFER_JOB_MAX_TAKEOVERS: '0',
});
const { ids, bucket, sftpRoot, chownToSftpUser } = suite;

const job = (id: string) => suite.stack.api.data('GET', `/transfers/${id}`);

async function startTransfer(name: string, from: string, sourcePath: string, to: string, destinationPath: string, options = {}) {
  const created = await suite.stack.api.data('POST', '/transfers', { name, sourceConnectionId: from, sourcePath, destinationConnectionId: to, destinationPath, options });
  const res = await suite.stack.api.call('POST', `/transfers/${created.id}/execute?wait=false`);
  expect(res.status).toBe(202);
  return created.id as string;
}

describe('cancel mid-run', () => {
  test('sftp → s3: no partial object and no open multipart upload; finished objects are whole', async () => {
    const agent = await suite.stack.startAgent('cancel-agent-1');
    const expected: Digests = new Map([['big/huge.bin', await writeRandomFile(join(sftpRoot, 'cancel-src', 'big', 'huge.bin'), 400 * 1024 * 1024)]]);
    const id = await startTransfer('cancel up', ids.sftp, '/cancel-src', ids.s3, '/cancel-dst', { concurrency: 1 });
    await waitFor('bytes moving', () => job(id), (j) => j.bytes_transferred > 0 || !unfinished(j));
    const cancelled = await suite.stack.api.call('POST', `/transfers/${id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.data.status).toBe('cancelled');
    // The agent aborts the upload; allow it a moment to tell the store.
    await waitFor('multipart uploads aborted', () => openUploads(suite.s3, bucket), (n) => n === 0, 20_000);
    const left = await digestBucket(suite.s3, bucket, 'cancel-dst');
    expect(left.files.has('big/huge.bin')).toBe(false);
    expect(treeDiff(expected, left.files).filter((p) => !p.startsWith('missing'))).toEqual([]);
    expect((await job(id)).status).toBe('cancelled');
    await stopProc(agent.proc);
    await suite.stack.waitForAgent(agent.id, 'offline');
  }, 180_000);

  test('s3 → sftp: no temporary or partial file is left at the destination', async () => {
    const agent = await suite.stack.startAgent('cancel-agent-2');
    chownToSftpUser();
    // Source: the tree of the previous upload is gone, so put one object in place through a copy first.
    await writeRandomFile(join(sftpRoot, 'seed', 'huge.bin'), 300 * 1024 * 1024);
    chownToSftpUser();
    const seed = await suite.stack.api.call('POST', `/transfers/${(await suite.stack.api.data('POST', '/transfers', {
      name: 'seed', sourceConnectionId: ids.sftp, sourcePath: '/seed', destinationConnectionId: ids.s3, destinationPath: '/seed',
    })).id}/execute`);
    expect(seed.body.success).toBe(true);

    const id = await startTransfer('cancel down', ids.s3, '/seed', ids.sftp, '/cancel-back', { concurrency: 1 });
    await waitFor('bytes moving', () => job(id), (j) => j.bytes_transferred > 0 || !unfinished(j));
    expect((await suite.stack.api.call('POST', `/transfers/${id}/cancel`)).status).toBe(200);
    // A temporary may vanish between the listing and its read (the agent removing it): look again.
    const filesLeft = async () => (await digestDir(join(sftpRoot, 'cancel-back')).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null;
      throw err;
    }))?.files.size ?? -1;
    await waitFor('destination clean', filesLeft, (n) => n === 0, 20_000);
    await stopProc(agent.proc);
    await suite.stack.waitForAgent(agent.id, 'offline');
  }, 180_000);
});

test('takeovers off, kill -9 of the agent: the job fails after the lease with a clear error; retry on a restarted agent copies only what was missing', async () => {
  // A 400 MiB file (about 3 s on a quiet machine): with 120 MiB the whole job could end between
  // the 20th file reported and the kill, and it completed instead of failing.
  const expected = await writeTree(join(sftpRoot, 'kill-src'), { count: 300, bigBytes: 400 * 1024 * 1024 });
  chownToSftpUser();
  const agent = await suite.stack.startAgent('kill-agent');
  const id = await startTransfer('killed', ids.sftp, '/kill-src', ids.s3, '/kill-dst', { concurrency: 4 });
  const before = await waitFor('some files copied', () => job(id), (j) => j.files_transferred >= 20 || !unfinished(j));
  expect(before.status).toBe('in-progress');
  agent.proc.child.kill('SIGKILL');
  const killedAt = Date.now();

  const failed = await waitFor('the lease to expire', () => job(id), (j) => !unfinished(j), LEASE_MS * 5);
  expect(failed.status).toBe('failed');
  // The lease runs from when the agent was last heard from, which may be a heartbeat or two before
  // the kill (a busy agent's heartbeats can lag), so the time since the kill is only bounded loosely;
  // the silence the server counted must be the whole lease.
  const silence = /^Agent kill-agent stopped responding \((\d+) s without contact\); automatic takeovers are off \(XFER_JOB_MAX_TAKEOVERS=0\)$/.exec(failed.error);
  expect(silence).not.toBeNull();
  expect(Number(silence![1])).toBeGreaterThanOrEqual(LEASE_MS / 1000);
  expect(Date.now() - killedAt).toBeGreaterThanOrEqual(LEASE_MS / 2);
  const copiedBefore = (await digestBucket(suite.s3, bucket, 'kill-dst')).files;
  // Nothing half-written: every object there is whole.
  expect(treeDiff(expected, copiedBefore).filter((p) => !p.startsWith('missing'))).toEqual([]);
  expect(copiedBefore.size).toBeGreaterThan(0);
  expect(copiedBefore.size).toBeLessThan(expected.size);

  // Executing a failed job again is a conflict; retry requeues it.
  expect((await suite.stack.api.call('POST', `/transfers/${id}/execute`)).status).toBe(409);
  const retried = await suite.stack.api.call('POST', `/transfers/${id}/retry`);
  expect(retried.status).toBe(200);
  expect(retried.body.data).toMatchObject({ status: 'queued', attempt: 2 });

  const restarted = suite.stack.spawnAgent(agent.token);
  await suite.stack.waitForAgent(agent.id, 'online');
  const done = await suite.stack.api.call('POST', `/transfers/${id}/execute`);
  expect(done.body).toMatchObject({ success: true });
  const final = await job(id);
  expect(final).toMatchObject({ status: 'completed', files_total: expected.size, files_skipped: copiedBefore.size });
  expect(final.files_transferred).toBe(expected.size - copiedBefore.size);
  expect(treeDiff(expected, (await digestBucket(suite.s3, bucket, 'kill-dst')).files)).toEqual([]);
  await stopProc(restarted);
}, 600_000);

test('a revoked agent is disconnected at once and cannot reconnect; a wrong token never connects', async () => {
  const agent = await suite.stack.startAgent('revoked-agent');
  const revokedAt = Date.now();
  expect((await suite.stack.api.call('DELETE', `/agents/${agent.id}`)).status).toBe(200);
  // Terminal close: the agent exits by itself with its "refused" code and does not retry.
  expect(await agent.proc.exited).toBe(3);
  expect(Date.now() - revokedAt).toBeLessThan(5000);
  expect(agent.proc.output()).toMatch(/revoked/i);

  const again = suite.stack.spawnAgent(agent.token);
  expect(await again.exited).toBe(3);
  expect((await suite.stack.api.call('GET', `/agents/${agent.id}`)).status).toBe(404);

  const wrong = suite.stack.spawnAgent(`agt_${randomBytes(32).toString('base64url')}`);
  expect(await wrong.exited).toBe(3);
  expect(wrong.output()).not.toMatch(/welcome|session open/i);
}, 60_000);

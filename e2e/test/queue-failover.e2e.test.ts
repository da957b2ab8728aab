import { join } from 'node:path';
import { HeadObjectCommand } from '@aws-sdk/client-s3';
import { stopProc } from '../src/stack.js';
import { fileResults, sftpAndS3, sftpAndS3Suite, unfinished, waitFor } from './support/stack-helpers.js';
import { digestBucket, openUploads, treeDiff, writeTree } from './support/trees.js';

/**
 * The queue and failover with the real binaries (issue 14 acceptance): ten transfers executed at
 * once on one agent limited to 2 jobs all complete, never more than 2 at a time; and in a pool of
 * two agents, kill -9 of the one running a transfer hands it to the other without a manual
 * retry, which resumes: nothing attempt 1 verified is copied again.
 */
const LEASE_MS = 6000;
const suite = sftpAndS3Suite('e2e-queue', { XFER_JOB_LEASE_MS: String(LEASE_MS), XFER_AGENT_HEARTBEAT_MS: '1000', XFER_DISPATCH_POLL_MS: '100' });
const { ids, bucket, sftpRoot, chownToSftpUser } = suite;
const job = (id: string) => suite.stack.api.data('GET', `/transfers/${id}`);

test('10 concurrent blocking executes on one agent with max_jobs 2: all 10 complete, never more than 2 at a time', async () => {
  const trees = [];
  for (let i = 0; i < 10; i++) trees.push(await writeTree(join(sftpRoot, `many-${i}`), { count: 20, bigBytes: 2 * 1024 * 1024 }));
  chownToSftpUser();
  const agent = await suite.stack.startAgent('queue-agent');
  const limited = await suite.stack.api.data('PUT', `/agents/${agent.id}`, { max_jobs: 2 });
  expect(limited).toMatchObject({ max_jobs: 2, agent_max_jobs: 4, slots: { total: 2 } });
  const created: string[] = [];
  for (let i = 0; i < 10; i++) {
    created.push((await suite.stack.api.data('POST', '/transfers', {
      name: `many ${i}`, sourceConnectionId: ids.sftp, sourcePath: `/many-${i}`, destinationConnectionId: ids.s3, destinationPath: `/many-${i}`,
    })).id as string);
  }
  let done = false;
  const all = Promise.all(created.map((id) => suite.stack.api.call('POST', `/transfers/${id}/execute`))).finally(() => (done = true));
  // While they run: never more than 2 in progress, and the agent never holds more than its 2 slots.
  let most = 0;
  let sawWaiting = false;
  while (!done) {
    const running = await suite.stack.api.call('GET', '/transfers?status=in-progress&limit=100');
    const waiting = await suite.stack.api.call('GET', '/transfers?status=queued&limit=100');
    const slots = (await suite.stack.api.data('GET', `/agents/${agent.id}`)).slots;
    most = Math.max(most, running.body.data.length, slots.running);
    sawWaiting ||= waiting.body.data.some((t: { queue_position: number | null }) => t.queue_position !== null);
    await new Promise((r) => setTimeout(r, 50));
  }
  for (const answer of await all) expect(answer.body).toMatchObject({ success: true });
  expect(most).toBeLessThanOrEqual(2);
  expect(most).toBeGreaterThan(0);
  expect(sawWaiting).toBe(true);
  for (let i = 0; i < 10; i++) {
    expect(await job(created[i]!)).toMatchObject({ status: 'completed', attempts: 1, files_total: trees[i]!.size });
    expect(treeDiff(trees[i]!, (await digestBucket(suite.s3, bucket, `many-${i}`)).files)).toEqual([]);
  }
  // The agent's own log: it never refused a job as busy.
  expect(agent.proc.output()).not.toContain('agent busy');
  await stopProc(agent.proc);
  await suite.stack.waitForAgent(agent.id, 'offline');
}, 600_000);

test('a pool of 2: kill -9 of the agent running a transfer, the other takes it over and completes it without a retry; attempts 2; nothing attempt 1 verified is copied again', async () => {
  const expected = await writeTree(join(sftpRoot, 'pool-src'), { count: 300, bigBytes: 200 * 1024 * 1024 });
  chownToSftpUser();
  const pooled = await sftpAndS3(suite.stack, 'pooled', sftpRoot, bucket, { agent_pool: 'e2e-pool' });
  const agents = [
    await suite.stack.startAgent('pool-a', {}, ['--label', 'e2e-pool']),
    await suite.stack.startAgent('pool-b', {}, ['--label', 'e2e-pool']),
  ];
  for (const a of agents) expect(await suite.stack.api.data('GET', `/agents/${a.id}`)).toMatchObject({ agent_labels: ['e2e-pool'], pools: ['e2e-pool'] });
  const created = await suite.stack.api.data('POST', '/transfers', {
    name: 'pool failover', sourceConnectionId: pooled.sftp, sourcePath: '/pool-src', destinationConnectionId: pooled.s3, destinationPath: '/pool-dst', options: { concurrency: 4 },
  });
  const id = created.id as string;
  expect((await suite.stack.api.call('POST', `/transfers/${id}/execute?wait=false`)).status).toBe(202);
  // Killed while some files are recorded copied and the big file is a multipart upload under way.
  const before = await waitFor('files copied and a multipart upload open', async () => ({ job: await job(id), uploads: await openUploads(suite.s3, bucket) }),
    (s) => (s.job.files_transferred >= 20 && s.uploads > 0) || !unfinished(s.job), 180_000);
  expect(before.job).toMatchObject({ status: 'in-progress', attempt: 1, mode: 'direct' });
  const victim = agents.find((a) => a.id === before.job.agent_id)!;
  const survivor = agents.find((a) => a !== victim)!;
  victim.proc.child.kill('SIGKILL');
  await victim.proc.exited;

  const final = await waitFor('the transfer to end', () => job(id), (j) => !unfinished(j), 300_000);
  expect(final).toMatchObject({
    status: 'completed', attempt: 2, attempts: 2, takeovers: 1, agent_id: survivor.id, files_total: expected.size, files_failed: 0,
    last_interruption: { attempt: 1, agent_id: victim.id, reason: expect.stringMatching(/^Agent pool-\w stopped responding \(\d+ s without contact\)$/) },
  });
  const takenOverAt = Date.parse(final.last_interruption.at);

  const first = await fileResults(suite.stack.api, id, 1);
  const second = await fileResults(suite.stack.api, id, 2);
  const verified = [...first.values()].filter((f) => f.status === 'copied');
  expect(verified.length).toBeGreaterThanOrEqual(20);
  expect(second.size).toBe(expected.size);
  for (const f of verified) {
    // Skipped, saying so; the object was last written before the takeover (by attempt 1).
    expect(second.get(f.path)).toMatchObject({ status: 'skipped', verified_by: 'attempt 1', sha256: f.sha256, size: f.size });
    const head = await suite.s3.send(new HeadObjectCommand({ Bucket: bucket, Key: `pool-dst/${f.path}` }));
    expect(head.LastModified!.getTime()).toBeLessThan(takenOverAt);
  }
  expect(second.get('big/big.bin')).toMatchObject({ status: 'copied' });
  expect(treeDiff(expected, (await digestBucket(suite.s3, bucket, 'pool-dst')).files)).toEqual([]);
  expect(await openUploads(suite.s3, bucket)).toBe(0);
  expect(survivor.proc.output()).not.toContain('results of earlier attempts are not available');
  await stopProc(survivor.proc);
}, 600_000);

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Proc } from '../src/stack.js';
import { unfinished, waitFor } from './support/stack-helpers.js';
import { digestBucket, openUploads } from './support/trees.js';
import {
  DESTINATION_POOL, SOURCE_POOL, expectRelayedCopy, expectResumed, killAgent, midRun, relaySuite, sourceEnded, startTransfer, subtree,
} from './support/relays.js';

/**
 * Relays with the real binaries (issue 14 acceptance): real sshd and S3 servers, one
 * `xfer-server`, three `xfer-agent`s. The sftp connection names pool `src`, the s3 connection
 * pool `dst`; agent A is in `src` (its operator's `--label`), B (`--label`) and B2 (the account's
 * `labels`) in `dst`: no agent serves both ends, so every run is relayed from A to B or B2.
 * A tree of small files and a 200 MiB file arrives byte-identical; a cancel mid-file leaves
 * nothing at the destination and stops the source side; kill -9 of the destination agent mid-run
 * hands the job to the other `dst` agent, which resumes. Across two instances: relay-instances.e2e.test.ts.
 */
const BIG_BYTES = 200 * 1024 * 1024;
const suite = relaySuite('e2e-relay', { tree: { count: 300, bigBytes: BIG_BYTES } });
const agents = {} as Record<'a' | 'b' | 'b2', { id: string; name: string; proc: Proc }>;
const job = (id: string) => suite.stack.api.data('GET', `/transfers/${id}`);

beforeAll(async () => {
  const { stack } = suite;
  agents.a = { ...await stack.startAgent('relay-a', {}, ['--label', SOURCE_POOL]), name: 'relay-a' };
  agents.b = { ...await stack.startAgent('relay-b', {}, ['--label', DESTINATION_POOL]), name: 'relay-b' };
  const b2 = await stack.api.data('POST', '/agents', { name: 'relay-b2', labels: [DESTINATION_POOL] });
  agents.b2 = { id: b2.id, name: 'relay-b2', proc: stack.spawnAgent(b2.token) };
  await stack.waitForAgent(b2.id, 'online');
}, 60_000);

/** The destination agents (pool `dst`), by id. */
const destinations = () => [agents.b, agents.b2];

test('pools: A serves only the sftp end, B and B2 only the s3 end (operator labels and account labels)', async () => {
  const view = (id: string) => suite.stack.api.data('GET', `/agents/${id}`);
  expect(await view(agents.a.id)).toMatchObject({ status: 'online', agent_labels: [SOURCE_POOL], labels: [], pools: [SOURCE_POOL] });
  expect(await view(agents.b.id)).toMatchObject({ status: 'online', agent_labels: [DESTINATION_POOL], labels: [], pools: [DESTINATION_POOL] });
  expect(await view(agents.b2.id)).toMatchObject({ status: 'online', agent_labels: [], labels: [DESTINATION_POOL], pools: [DESTINATION_POOL] });
});

test('a workflow\'s delete_source after a relayed transfer: the source agent vouched for every file, so every verified file is deleted at the source', async () => {
  const { stack } = suite;
  const names = ['one.csv', 'two.csv', 'deep/three.csv'];
  for (const name of names) {
    mkdirSync(join(suite.sftpRoot, 'settle', name, '..'), { recursive: true });
    writeFileSync(join(suite.sftpRoot, 'settle', name), randomBytes(5_000 + name.length));
  }
  spawnSync('chown', ['-R', `${process.env.XFER_TEST_SFTP_USER}:`, suite.sftpRoot]);
  const workflow = await stack.api.data('POST', '/workflows', {
    name: 'relay then delete',
    steps: [
      { type: 'transfer', sourceConnectionId: suite.ids.sftp, sourcePath: '/settle', destinationConnectionId: suite.ids.s3, destinationPath: '/settled' },
      { type: 'delete_source' },
    ],
  });
  const started = await stack.api.data('POST', `/workflows/${workflow.id as string}/run`, {});
  const done = await waitFor('the workflow run to end', () => stack.api.data('GET', `/workflow-runs/${started.id as string}`), (r) => !['queued', 'running'].includes(r.status), 120_000);
  expect(done).toMatchObject({ status: 'completed', steps: [{ status: 'completed' }, { type: 'delete_source', status: 'completed', files: { deleted: names.length, failed: 0, unverified: 0 } }] });
  expect(await job(done.steps[0].transfer_id)).toMatchObject({ status: 'completed', mode: 'relay', source_agent_id: agents.a.id });
  for (const name of names) expect(existsSync(join(suite.sftpRoot, 'settle', name))).toBe(false);
  expect((await digestBucket(suite.s3, suite.bucket, 'settled')).files.size).toBe(names.length);
}, 180_000);

test('a tree of small files and a 200 MiB file, relayed: completed, byte-identical, verified, counters right, nothing partial', async () => {
  const id = await startTransfer(suite.stack.api, suite.ids, 'relay tree', '/src', '/tree');
  const final = await waitFor('the relay to end', () => job(id), (j) => !unfinished(j), 300_000);
  expect(final).toMatchObject({ status: 'completed', mode: 'relay', source_agent_id: agents.a.id, attempts: 1, takeovers: 0, last_interruption: null });
  expect(destinations().map((a) => a.id)).toContain(final.agent_id);
  const { view, results } = await expectRelayedCopy(suite, suite.stack.api, id, 'tree');
  // A fresh destination: everything copied, the empty file and the big one among them.
  expect(view).toMatchObject({ files_transferred: suite.tree.size, files_skipped: 0 });
  expect(results.get('empty.txt')).toMatchObject({ status: 'copied', size: 0 });
  expect(results.get('big/big.bin')).toMatchObject({ status: 'copied', size: BIG_BYTES });
  expect(view.bytes_transferred).toBeGreaterThan(BIG_BYTES);
  // The source side ended with the run, after sending every byte (tar headers and trailers on top).
  const ended = await waitFor('A\'s source side to end', async () => sourceEnded(agents.a.proc, id, 1), (l) => l !== undefined, 10_000);
  expect(ended!.bytes_sent).toBeGreaterThan(view.bytes_transferred);
}, 300_000);

test('cancel while the 200 MiB file is relayed: cancelled, nothing at the destination, the source side stops, and A relays the next job', async () => {
  const id = await startTransfer(suite.stack.api, suite.ids, 'relay cancel', '/src/big', '/cancel');
  const moving = await waitFor('bytes moving and the upload open', async () => ({ job: await job(id), uploads: await openUploads(suite.s3, suite.bucket) }),
    (s) => (s.job.bytes_transferred > 0 && s.uploads > 0) || !unfinished(s.job), 120_000);
  expect(moving.job).toMatchObject({ status: 'in-progress', attempt: 1, mode: 'relay', source_agent_id: agents.a.id, last_interruption: null });
  expect(moving.job.bytes_transferred).toBeLessThan(BIG_BYTES);

  const cancelled = await suite.stack.api.call('POST', `/transfers/${id}/cancel`);
  expect(cancelled.status).toBe(200);
  expect(cancelled.body.data.status).toBe('cancelled');
  // The destination agent aborts the upload; the source agent's side ends early.
  await waitFor('the multipart upload aborted', () => openUploads(suite.s3, suite.bucket), (n) => n === 0, 30_000);
  const ended = await waitFor('A\'s source side to end', async () => sourceEnded(agents.a.proc, id, 1), (l) => l !== undefined, 30_000);
  expect(ended!.bytes_sent).toBeLessThan(BIG_BYTES);
  expect((await digestBucket(suite.s3, suite.bucket, 'cancel')).files.size).toBe(0);
  expect(await job(id)).toMatchObject({ status: 'cancelled', attempts: 1 });

  // A stays healthy: online, and the source of the next relay.
  expect(await suite.stack.api.data('GET', `/agents/${agents.a.id}`)).toMatchObject({ status: 'online' });
  const next = await startTransfer(suite.stack.api, suite.ids, 'relay after cancel', '/src/a', '/after-cancel');
  expect(await waitFor('the next relay to end', () => job(next), (j) => !unfinished(j), 120_000)).toMatchObject({ status: 'completed', mode: 'relay', source_agent_id: agents.a.id, attempts: 1, last_interruption: null });
  await expectRelayedCopy(suite, suite.stack.api, next, 'after-cancel', subtree(suite.tree, 'a'));
}, 300_000);

test('kill -9 of the destination agent mid-relay: the other dst agent takes it over and completes it (attempts 2); what attempt 1 verified is not copied again', async () => {
  const id = await startTransfer(suite.stack.api, suite.ids, 'relay failover', '/src', '/failover');
  const before = await midRun(suite, suite.stack.api, id);
  expect(before).toMatchObject({ status: 'in-progress', attempt: 1, mode: 'relay', source_agent_id: agents.a.id, last_interruption: null });
  const victim = destinations().find((a) => a.id === before.agent_id)!;
  const survivor = destinations().find((a) => a !== victim)!;
  const killed = await killAgent(suite, victim.proc, 'failover');

  const final = await waitFor('the transfer to end', () => job(id), (j) => !unfinished(j), 300_000);
  expect(final).toMatchObject({
    status: 'completed', attempt: 2, attempts: 2, takeovers: 1, mode: 'relay', agent_id: survivor.id, source_agent_id: agents.a.id,
    last_interruption: { attempt: 1, agent_id: victim.id, reason: `Relay destination agent ${victim.name} disconnected` },
  });
  const { results } = await expectRelayedCopy(suite, suite.stack.api, id, 'failover');
  await expectResumed(suite, suite.stack.api, id, 'failover', results, killed);
  // A served both attempts' source sides: the first ended with the destination's loss.
  for (const attempt of [1, 2]) await waitFor(`A's source side of attempt ${attempt} to end`, async () => sourceEnded(agents.a.proc, id, attempt), (l) => l !== undefined, 10_000);
  expect(survivor.proc.output()).not.toContain('results of earlier attempts are not available');
}, 300_000);

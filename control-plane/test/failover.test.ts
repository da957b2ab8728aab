import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { buildTestApp, createAccount } from './helper.js';
import { counters, getTransfer, makeAgent, makeConnection, makeTransfer, sha, transferAction, updateAgent } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/**
 * Failover (issue 14): a run whose agent goes silent past its lease, or that the agent reports
 * interrupted, or that it refused, is taken over: the transfer waits again as the next attempt
 * (keeping its place), the scheduler starts it on an eligible agent with `resume: true`, and it
 * fails only when no eligible agent is online for XFER_JOB_ORPHAN_TIMEOUT, or past
 * XFER_JOB_MAX_TAKEOVERS takeovers.
 */
let app: App;
const LEASE_MS = 2_000;
const ORPHAN_MS = 1_500;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200, jobLeaseMs: LEASE_MS, jobOrphanTimeoutMs: ORPHAN_MS, jobMaxTakeovers: 2 });
  await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => app.close());

/** An account with a pool `p` of `members` connected fake agents and a transfer between connections served by the pool. */
async function pool(members: number) {
  const { apiKey: key } = await createAccount(app);
  const agents = [];
  for (let i = 0; i < members; i++) {
    const agent = await makeAgent(app, key, { labels: ['p'] });
    agents.push({ ...agent, client: (await ProtocolClient.connect(app, agent.token)).client });
  }
  const src = await makeConnection(app, key, 'sftp', { agent_pool: 'p' });
  const dst = await makeConnection(app, key, 's3', { agent_pool: 'p' });
  const job = await makeTransfer(app, key, src.id, dst.id);
  return { key, agents, job, src, dst };
}

/** Waits for the job.assign of `jobId` on any of the clients; returns the one that got it and the payload. */
async function assignedTo(clients: ProtocolClient[], jobId: string, attempt: number) {
  return eventually(async () => {
    for (const client of clients) {
      const found = client.all('job.assign').find((m) => m.payload.job_id === jobId && m.payload.attempt === attempt);
      if (found) return { client, payload: found.payload };
    }
    return null;
  }, `job.assign of attempt ${attempt}`);
}

const files = (n: number) => Array.from({ length: n }, (_, i) => ({ path: `f${i}`, status: 'copied' as const, size: 10, sha256: sha(i), verified_by: 'sha256' }));

test('an agent gone silent: after the lease its run is taken over by another pool member with resume, which sees what attempt 1 verified; attempts 2', async () => {
  const { key, agents, job } = await pool(2);
  expect((await transferAction(app, key, job.id, 'execute', '?wait=false')).statusCode).toBe(202);
  const first = await assignedTo(agents.map((a) => a.client), job.id, 1);
  expect(first.payload.resume).toBe(false);
  first.client.send('job.accepted', { job_id: job.id });
  first.client.send('job.progress', { job_id: job.id, ...counters(4, 3, 30), listing_done: true, files: files(3) });
  await eventually(async () => (await getTransfer(app, key, job.id)).files_transferred === 3, 'progress recorded');
  const queuedAt = (await getTransfer(app, key, job.id)).queued_at;
  first.client.ws.terminate();

  const survivor = agents.find((a) => a.client !== first.client)!;
  const second = await assignedTo([survivor.client], job.id, 2);
  expect(second.payload).toMatchObject({ attempt: 2, resume: true });
  // The resume lookup: the new run sees what attempt 1 verified.
  survivor.client.send('job.accepted', { job_id: job.id });
  survivor.client.send('job.verified.query', { job_id: job.id, request_id: 'q1', paths: ['f0', 'f1', 'f2', 'f3'] });
  expect((await survivor.client.next('job.verified')).payload.files.map((f) => f.path).sort()).toEqual(['f0', 'f1', 'f2']);
  survivor.client.send('job.progress', { job_id: job.id, ...counters(4, 1, 10, { files_skipped: 3 }), listing_done: true, files: [{ path: 'f3', status: 'copied', size: 10, sha256: sha(3), verified_by: 'sha256' }] });
  survivor.client.send('job.completed', { job_id: job.id, ...counters(4, 1, 10, { files_skipped: 3 }) });
  const done = await eventually(async () => {
    const j = await getTransfer(app, key, job.id);
    return j.status === 'completed' && j;
  }, 'completed on the survivor');
  expect(done).toMatchObject({ attempt: 2, attempts: 2, takeovers: 1, agent_id: survivor.id, queued_at: queuedAt, files_skipped: 3, error: null });
  expect(done.last_interruption).toMatchObject({ attempt: 1, agent_id: agents.find((a) => a.client === first.client)!.id, reason: expect.stringMatching(/stopped responding/) });
  // One terminal event for the transfer, none for the interrupted run. (The end's event follows its change of state: wait for it.)
  const events = await eventually(async () => {
    const all = await app.db.outboxEvents.find({ 'data.id': job.id }).sort({ _id: 1 }).lean();
    return all.length >= 3 && all.map((e) => [e.type, e.data.attempt]);
  }, 'transfer.completed event');
  expect(events).toEqual([['transfer.started', 1], ['transfer.started', 2], ['transfer.completed', undefined]]);
  survivor.client.close();
});

test('the old agent coming back is told to abort its stale run', async () => {
  const { key, agents, job } = await pool(1);
  const [agent] = agents;
  await transferAction(app, key, job.id, 'execute', '?wait=false');
  await agent!.client.next('job.assign');
  agent!.client.send('job.accepted', { job_id: job.id });
  agent!.client.ws.terminate();
  await eventually(async () => (await getTransfer(app, key, job.id)).attempt === 2, 'taken over');
  // It comes back still running attempt 1: told to abort it, then given attempt 2 once that run ended.
  const { client, welcome } = await ProtocolClient.connect(app, agent!.token, { running_jobs: [job.id] });
  expect(welcome.abort_jobs).toEqual([job.id]);
  client.send('job.cancelled', { job_id: job.id, ...counters(0, 0, 0) });
  expect((await client.next('job.assign')).payload).toMatchObject({ job_id: job.id, attempt: 2, resume: true });
  await transferAction(app, key, job.id, 'cancel');
  client.close();
});

test('job.failed with interrupted: the run is taken over, not failed; a run refused before it was accepted likewise, after a backoff', async () => {
  const { key, agents, job } = await pool(2);
  await transferAction(app, key, job.id, 'execute', '?wait=false');
  const first = await assignedTo(agents.map((a) => a.client), job.id, 1);
  first.client.send('job.accepted', { job_id: job.id });
  first.client.send('job.failed', { job_id: job.id, ...counters(2, 1, 10), error: 'agent shutting down: the job was stopped before it finished', interrupted: true });
  const second = await assignedTo(agents.map((a) => a.client), job.id, 2);
  expect(second.payload.resume).toBe(true);
  expect((await getTransfer(app, key, job.id)).last_interruption).toMatchObject({ attempt: 1, reason: expect.stringMatching(/interrupted the run: agent shutting down/) });
  // Refused at once (no job.accepted): nothing ran; another run takes it (the limit of 2 takeovers is reached by then).
  const refusedAt = Date.now();
  second.client.send('job.failed', { job_id: job.id, ...counters(0, 0, 0), error: 'agent busy: already running 4 of max_jobs 4' });
  const third = await assignedTo(agents.map((a) => a.client), job.id, 3);
  // A second takeover waits out a backoff (1 s) first: a side that looks online but is gone cannot use up the takeovers at once.
  expect(Date.now() - refusedAt).toBeGreaterThanOrEqual(900);
  expect((await getTransfer(app, key, job.id)).last_interruption).toMatchObject({ attempt: 2, reason: 'The agent refused the run: agent busy: already running 4 of max_jobs 4' });
  // A third interruption passes XFER_JOB_MAX_TAKEOVERS (2): the transfer fails, saying why.
  third.client.send('job.accepted', { job_id: job.id });
  third.client.send('job.failed', { job_id: job.id, ...counters(0, 0, 0), error: 'relay lost its source', interrupted: true });
  const failed = await eventually(async () => {
    const j = await getTransfer(app, key, job.id);
    return j.status === 'failed' && j;
  }, 'failed past the takeover limit');
  expect(failed).toMatchObject({ attempt: 3, takeovers: 2 });
  expect(failed.error).toMatch(/interrupted the run: relay lost its source; not taken over again after 2 takeovers \(XFER_JOB_MAX_TAKEOVERS\)$/);
  for (const a of agents) a.client.close();
});

test('no eligible agent online for XFER_JOB_ORPHAN_TIMEOUT: a taken-over transfer fails, as does one that waits after execute', async () => {
  const { key, agents, job, src, dst } = await pool(1);
  await transferAction(app, key, job.id, 'execute', '?wait=false');
  await agents[0]!.client.next('job.assign');
  agents[0]!.client.send('job.accepted', { job_id: job.id });
  // A second transfer of the same pool waits behind the first (one slot).
  await updateAgent(app, key, agents[0]!.id, { max_jobs: 1 });
  const waiting = await makeTransfer(app, key, src.id, dst.id);
  await transferAction(app, key, waiting.id, 'execute', '?wait=false');
  agents[0]!.client.ws.terminate();

  for (const id of [job.id, waiting.id]) {
    const failed = await eventually(async () => {
      const j = await getTransfer(app, key, id);
      return j.status === 'failed' && j;
    }, 'failed as an orphan');
    expect(failed.error).toMatch(/^No online agent of pool 'p' can serve connection '[^']+' \(needs sftp connector\); no agent that could run it came online within \d+ s \(XFER_JOB_ORPHAN_TIMEOUT\)$/);
    expect(failed.queue_position).toBeNull();
    expect(await app.db.transferQueue.countDocuments({ _id: new Types.ObjectId(id) })).toBe(0);
  }
  expect((await getTransfer(app, key, job.id)).takeovers).toBe(1);
  expect((await getTransfer(app, key, waiting.id)).takeovers).toBe(0);
  // Failed, it can be retried like any failed transfer.
  expect((await transferAction(app, key, waiting.id, 'retry')).json().data).toMatchObject({ status: 'queued', attempt: 2, queued_at: null });
});

test('an agent coming back before the orphan timeout takes its taken-over transfer again, once its orphan clock started', async () => {
  const { key, agents, job } = await pool(1);
  await transferAction(app, key, job.id, 'execute', '?wait=false');
  await agents[0]!.client.next('job.assign');
  agents[0]!.client.ws.terminate();
  await eventually(async () => (await app.db.transferQueue.findById(job.id).lean())?.orphaned_since, 'orphan clock started');
  const { client } = await ProtocolClient.connect(app, agents[0]!.token);
  expect((await client.next('job.assign')).payload).toMatchObject({ job_id: job.id, attempt: 2, resume: true });
  client.send('job.accepted', { job_id: job.id });
  client.send('job.completed', { job_id: job.id, ...counters(1, 1, 1) });
  await eventually(async () => (await getTransfer(app, key, job.id)).status === 'completed', 'completed after coming back');
  client.close();
});

import { jest } from '@jest/globals';
import { Types } from 'mongoose';
import { CloseCodes } from '@xfer/shared';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, expectError } from './helper.js';
import { counters, getTransfer, makeAgent, makeConnection, makeTransfer, SECRET, sha, transferAction } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/** Jobs running on an agent, driven by a real WebSocket client speaking the protocol. */
let app: App;
const LEASE_MS = 2_000;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200, jobLeaseMs: LEASE_MS });
  await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => app.close());

/** A fresh account with one connected agent (sftp and s3) and a job from sftp to s3. */
async function setup() {
  const account = await createAccount(app);
  const agent = await makeAgent(app, account.apiKey);
  const { client } = await ProtocolClient.connect(app, agent.token);
  const src = await makeConnection(app, account.apiKey, 'sftp');
  const dst = await makeConnection(app, account.apiKey, 's3');
  const job = await makeTransfer(app, account.apiKey, src.id, dst.id);
  const key = account.apiKey;
  return { account, key, agent, client, src, dst, job };
}

/** Starts the job without waiting and returns the job.assign the agent got. */
async function startAndAssign(ctx: Awaited<ReturnType<typeof setup>>) {
  const res = await transferAction(app, ctx.key, ctx.job.id, 'execute', '?wait=false');
  expect(res.statusCode).toBe(202);
  const assign = await ctx.client.next('job.assign');
  ctx.client.send('job.accepted', { job_id: ctx.job.id });
  await eventually(async () => (await app.db.transfers.findById(ctx.job.id).lean())?.accepted_at, 'job accepted');
  return assign.payload;
}

const files = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => ({ path: `dir/file-${from + i}.bin`, status: 'copied' as const, size: 100, sha256: sha(from + i), verified_by: 'sha256' }));

describe('a job on an agent', () => {
  test('assign → accepted → progress → completed: counters, timestamps, per-file records, events and audit', async () => {
    const ctx = await setup();
    const res = await transferAction(app, ctx.key, ctx.job.id, 'execute', '?wait=false');
    expect(res.statusCode).toBe(202);
    // Execute makes it wait for an agent; the scheduler starts it on the agent's free slot.
    expect(res.json().data).toMatchObject({ id: ctx.job.id, status: 'queued', agent_id: null, attempt: 1, attempts: 1, queue_position: 1, mode: null });
    expect(res.json().data.queued_at).not.toBeNull();

    const assign = (await ctx.client.next('job.assign')).payload;
    expect(await getTransfer(app, ctx.key, ctx.job.id)).toMatchObject({ status: 'in-progress', agent_id: ctx.agent.id, mode: 'direct', queue_position: null });
    expect(assign).toMatchObject({
      job_id: ctx.job.id, attempt: 1, resume: false, source_path: '/in', destination_path: '/out',
      options: { overwrite: 'if_changed', verify: 'checksum', concurrency: 8 },
      source: { id: ctx.src.id, type: 'sftp', host: 'sftp.example.test', port: 22, credentials: { username: 'u', password: SECRET } },
      destination: { id: ctx.dst.id, type: 's3', options: { force_path_style: true, secure: true }, credentials: { secret_access_key: SECRET } },
    });
    // Decrypted credentials travel in the frame only: never stored, never in a response.
    expect(JSON.stringify(await app.db.transfers.findById(ctx.job.id).lean())).not.toContain(SECRET);

    ctx.client.send('job.accepted', { job_id: ctx.job.id });
    const agentView = await eventually(async () => {
      const r = await app.inject({ method: 'GET', url: `/api/v1/agents/${ctx.agent.id}`, headers: auth(ctx.key) });
      return r.json().data.running_jobs.length > 0 && r.json().data;
    }, 'agent lists its running job');
    expect(agentView.running_jobs).toEqual([ctx.job.id]);

    ctx.client.send('job.progress', { job_id: ctx.job.id, ...counters(10, 5, 500), listing_done: true, files: files(0, 5) });
    const mid = await eventually(async () => {
      const j = await getTransfer(app, ctx.key, ctx.job.id);
      return j.files_transferred === 5 && j;
    }, 'first progress applied');
    expect(mid).toMatchObject({ status: 'in-progress', files_total: 10, bytes_transferred: 500, completed_at: null });

    ctx.client.send('job.progress', { job_id: ctx.job.id, ...counters(10, 10, 1000), listing_done: true, files: files(5, 5) });
    ctx.client.send('job.completed', { job_id: ctx.job.id, ...counters(10, 10, 1000) });
    const done = await eventually(async () => {
      const j = await getTransfer(app, ctx.key, ctx.job.id);
      return j.status === 'completed' && j;
    }, 'job completed');
    expect(done).toMatchObject({ files_total: 10, files_transferred: 10, files_skipped: 0, files_failed: 0, bytes_transferred: 1000, error: null });
    expect(Date.parse(done.completed_at as string)).toBeGreaterThanOrEqual(Date.parse(done.started_at as string));

    const page1 = (await app.inject({ method: 'GET', url: `/api/v1/transfers/${ctx.job.id}/files?limit=6`, headers: auth(ctx.key) })).json();
    expect(page1.data).toHaveLength(6);
    expect(page1.data[0]).toEqual({
      path: 'dir/file-9.bin', attempt: 1, status: 'copied', size: 100, sha256: sha(9), verified_by: 'sha256', error: null, reason: null, created_at: expect.any(String),
    });
    const page2 = (await app.inject({ method: 'GET', url: `/api/v1/transfers/${ctx.job.id}/files?limit=6&cursor=${page1.next_cursor}`, headers: auth(ctx.key) })).json();
    expect(page2.data).toHaveLength(4);
    expect(page2.next_cursor).toBeNull();

    // The end's event follows the job's change of state (two writes): wait for it.
    const events = await eventually(async () => {
      const all = await app.db.outboxEvents.find({ account_id: new Types.ObjectId(ctx.account.accountId) }).sort({ _id: 1 }).lean();
      return all.length >= 2 && all;
    }, 'transfer.completed event');
    expect(events.map((e) => [e.type, e.data])).toEqual([
      ['transfer.started', { id: ctx.job.id, name: ctx.job.name, attempt: 1, agent_id: ctx.agent.id }],
      ['transfer.completed', { id: ctx.job.id, files_transferred: 10, bytes_transferred: 1000, files_deleted: 0 }],
    ]);
    const actions = (await app.db.auditEvents.find({ 'resource.id': ctx.job.id }).lean()).map((e) => e.action);
    expect(actions).toEqual(['transfer.create', 'transfer.execute']);

    const deleted = await app.inject({ method: 'DELETE', url: `/api/v1/transfers/${ctx.job.id}`, headers: auth(ctx.key) });
    expect(deleted.json()).toEqual({ data: { id: ctx.job.id, deleted: true } });
    expect(await app.db.transferFiles.countDocuments({ job_id: new Types.ObjectId(ctx.job.id) })).toBe(0);
    ctx.client.close();
  });

  test('a blocking execute answers the bare summary when the job completes', async () => {
    const ctx = await setup();
    const pending = transferAction(app, ctx.key, ctx.job.id, 'execute');
    const assign = await ctx.client.next('job.assign');
    ctx.client.send('job.accepted', { job_id: assign.payload.job_id });
    ctx.client.send('job.completed', { job_id: assign.payload.job_id, ...counters(3, 3, 42) });
    const res = await pending;
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ success: true, files_transferred: 3, bytes_transferred: 42 });
    ctx.client.close();
  });

  test('a blocking execute of a job that fails answers success false with status, files_total and error', async () => {
    const ctx = await setup();
    const pending = transferAction(app, ctx.key, ctx.job.id, 'execute');
    const assign = await ctx.client.next('job.assign');
    ctx.client.send('job.accepted', { job_id: assign.payload.job_id });
    ctx.client.send('job.failed', { job_id: assign.payload.job_id, ...counters(4, 2, 20, { files_failed: 2 }), error: '2 files failed: a.txt (permission denied), b.txt (permission denied)' });
    const res = await pending;
    expect(res.json()).toEqual({
      success: false, files_transferred: 2, bytes_transferred: 20, status: 'failed', files_total: 4,
      error: '2 files failed: a.txt (permission denied), b.txt (permission denied)',
    });
    // Emitted right after the state change the execute answered on (transfer-states.ts ended()): a read can fall in between.
    const failed = await eventually(() => app.db.outboxEvents.findOne({ type: 'transfer.failed', 'data.id': ctx.job.id }).lean(), 'the transfer.failed event');
    expect(failed.data).toEqual({ id: ctx.job.id, status: 'failed', error: expect.stringMatching(/^2 files failed/), files_transferred: 2, bytes_transferred: 20, files_deleted: 0 });
    ctx.client.close();
  });

  test('a client that disconnects from a blocking execute does not stop the job', async () => {
    const ctx = await setup();
    const address = app.server.address() as { port: number };
    const gone = new AbortController();
    const request = fetch(`http://127.0.0.1:${address.port}/api/v1/transfers/${ctx.job.id}/execute`, {
      method: 'POST', headers: auth(ctx.key), signal: gone.signal,
    }).catch((err: Error) => err.name);
    const assign = await ctx.client.next('job.assign');
    ctx.client.send('job.accepted', { job_id: assign.payload.job_id });
    gone.abort();
    expect(await request).toBe('AbortError');
    ctx.client.send('job.completed', { job_id: assign.payload.job_id, ...counters(1, 1, 5) });
    await eventually(async () => (await getTransfer(app, ctx.key, ctx.job.id)).status === 'completed', 'job completed without its client');
    ctx.client.close();
  });

  test('execute twice: the second is 409 while the first runs', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    expectError(await transferAction(app, ctx.key, ctx.job.id, 'execute'), 409, `Transfer ${ctx.job.id} is in-progress; only queued transfers can be executed`);
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/transfers/${ctx.job.id}`, headers: auth(ctx.key) }), 409, /is in-progress; only completed, failed or cancelled/);
    ctx.client.close();
  });

  test('cancel while running: the agent gets job.cancel, a waiting execute answers cancelled, late reports change nothing', async () => {
    const ctx = await setup();
    const waiting = transferAction(app, ctx.key, ctx.job.id, 'execute');
    const assign = await ctx.client.next('job.assign');
    ctx.client.send('job.accepted', { job_id: ctx.job.id });
    ctx.client.send('job.progress', { job_id: ctx.job.id, ...counters(8, 2, 200), listing_done: false, files: files(0, 2) });
    await eventually(async () => (await getTransfer(app, ctx.key, ctx.job.id)).files_transferred === 2, 'progress applied');

    const res = await transferAction(app, ctx.key, ctx.job.id, 'cancel');
    expect(res.json().data).toMatchObject({ status: 'cancelled', files_transferred: 2 });
    expect((await ctx.client.next('job.cancel')).payload).toEqual({ job_id: assign.payload.job_id });
    expect((await waiting).json()).toEqual({ success: false, status: 'cancelled', files_total: 8, files_transferred: 2, bytes_transferred: 200, error: 'Transfer cancelled' });

    ctx.client.send('job.progress', { job_id: ctx.job.id, ...counters(8, 6, 600), listing_done: true, files: files(2, 4) });
    ctx.client.send('job.cancelled', { job_id: ctx.job.id, ...counters(8, 6, 600) });
    // A ping answered after both reports proves the session handled them (reports apply in order).
    const ping = app.inject({ method: 'POST', url: `/api/v1/agents/${ctx.agent.id}/test`, headers: auth(ctx.key) });
    ctx.client.send('pong', { request_id: (await ctx.client.next('ping')).payload.request_id });
    expect((await ping).json().data.success).toBe(true);
    expect(await getTransfer(app, ctx.key, ctx.job.id)).toMatchObject({ status: 'cancelled', files_transferred: 2, bytes_transferred: 200, error: null });
    expect(await app.db.transferFiles.countDocuments({ job_id: new Types.ObjectId(ctx.job.id) })).toBe(2);
    const events = (await app.db.outboxEvents.find({ 'data.id': ctx.job.id }).lean()).map((e) => [e.type, e.data.status]);
    expect(events).toEqual([['transfer.started', undefined], ['transfer.failed', 'cancelled']]);
    ctx.client.close();
  });

  test('cancel, retry and execute again at once: the new run waits until the old one reported its end', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    await transferAction(app, ctx.key, ctx.job.id, 'cancel');
    await ctx.client.next('job.cancel');
    await transferAction(app, ctx.key, ctx.job.id, 'retry');
    expect((await transferAction(app, ctx.key, ctx.job.id, 'execute', '?wait=false')).json().data).toMatchObject({ status: 'queued', attempt: 2 });
    // The old run's last reports: nothing of them may touch attempt 2.
    ctx.client.send('job.progress', { job_id: ctx.job.id, ...counters(5, 5, 50), listing_done: true, files: files(0, 1) });
    ctx.client.send('job.cancelled', { job_id: ctx.job.id, ...counters(5, 5, 50) });
    const assign = await ctx.client.next('job.assign');
    expect(assign.payload).toMatchObject({ attempt: 2, resume: true });
    expect(ctx.client.all('job.assign')).toHaveLength(2);
    ctx.client.send('job.accepted', { job_id: ctx.job.id });
    ctx.client.send('job.completed', { job_id: ctx.job.id, ...counters(5, 0, 0, { files_skipped: 5 }) });
    await eventually(async () => (await getTransfer(app, ctx.key, ctx.job.id)).status === 'completed', 'attempt 2 completed');
    expect(await getTransfer(app, ctx.key, ctx.job.id)).toMatchObject({ attempt: 2, files_skipped: 5, files_transferred: 0, error: null });
    expect(await app.db.transferFiles.countDocuments({ job_id: new Types.ObjectId(ctx.job.id) })).toBe(0);
    ctx.client.close();
  });

  test('retry after a failure: queued as attempt 2; the next job.assign has resume true; earlier file records stay', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    ctx.client.send('job.progress', { job_id: ctx.job.id, ...counters(3, 2, 200), listing_done: true, files: files(0, 2) });
    ctx.client.send('job.failed', { job_id: ctx.job.id, ...counters(3, 2, 200, { files_failed: 1 }), error: '1 file failed: dir/file-2.bin (connection reset)' });
    await eventually(async () => (await getTransfer(app, ctx.key, ctx.job.id)).status === 'failed', 'job failed');

    const retried = await transferAction(app, ctx.key, ctx.job.id, 'retry');
    expect(retried.json().data).toMatchObject({ status: 'queued', attempt: 2, files_transferred: 0, bytes_transferred: 0, error: null, agent_id: null, started_at: null });
    const pending = transferAction(app, ctx.key, ctx.job.id, 'execute');
    const assign = await ctx.client.next('job.assign');
    expect(assign.payload).toMatchObject({ job_id: ctx.job.id, attempt: 2, resume: true });
    ctx.client.send('job.accepted', { job_id: ctx.job.id });
    const skipped = files(0, 2).map((f) => ({ path: f.path, status: 'skipped' as const, size: 100 }));
    ctx.client.send('job.progress', { job_id: ctx.job.id, ...counters(3, 1, 100, { files_skipped: 2 }), listing_done: true, files: [...skipped, ...files(2, 1)] });
    ctx.client.send('job.completed', { job_id: ctx.job.id, ...counters(3, 1, 100, { files_skipped: 2 }) });
    expect((await pending).json()).toEqual({ success: true, files_transferred: 1, bytes_transferred: 100 });
    expect(await getTransfer(app, ctx.key, ctx.job.id)).toMatchObject({ status: 'completed', attempt: 2, files_skipped: 2 });

    const list = async (query: string) => (await app.inject({ method: 'GET', url: `/api/v1/transfers/${ctx.job.id}/files${query}`, headers: auth(ctx.key) })).json().data;
    expect((await list('?attempt=1')).map((f: { path: string }) => f.path).sort()).toEqual(['dir/file-0.bin', 'dir/file-1.bin']);
    expect((await list('?attempt=2&status=skipped')).map((f: { path: string }) => f.path).sort()).toEqual(['dir/file-0.bin', 'dir/file-1.bin']);
    const actions = (await app.db.auditEvents.find({ 'resource.id': ctx.job.id }).lean()).map((e) => e.action);
    expect(actions).toEqual(['transfer.create', 'transfer.execute', 'transfer.retry', 'transfer.execute']);
    ctx.client.close();
  });

  test('reports arriving faster than the database takes them are merged into few writes; the end is not delayed', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    const inserts = jest.spyOn(app.db.transferFiles, 'insertMany');
    try {
      // 1,000 files in 200 reports of 5, as an agent copying small files sends them.
      for (let i = 0; i < 200; i++) ctx.client.send('job.progress', { job_id: ctx.job.id, ...counters(1000, 5 * (i + 1), 500 * (i + 1)), listing_done: true, files: files(5 * i, 5) });
      ctx.client.send('job.completed', { job_id: ctx.job.id, ...counters(1000, 1000, 100_000) });
      const ended = Date.now();
      await eventually(async () => (await getTransfer(app, ctx.key, ctx.job.id)).status === 'completed', 'job completed');
      expect(await getTransfer(app, ctx.key, ctx.job.id)).toMatchObject({ files_transferred: 1000, bytes_transferred: 100_000 });
      expect(await app.db.transferFiles.countDocuments({ job_id: new Types.ObjectId(ctx.job.id) })).toBe(1000);
      expect(inserts.mock.calls.length).toBeLessThanOrEqual(20);
      // The end's report cut the wait for more reports short (it would be 100 ms per write left).
      expect(Date.now() - ended).toBeLessThan(2000);
    } finally {
      inserts.mockRestore();
      ctx.client.close();
    }
  });

  test('an agent that goes silent: when the lease expires its run is taken over, the transfer waits again as attempt 2, saying why', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    ctx.client.ws.terminate();
    const waiting = await eventually(async () => {
      const j = await getTransfer(app, ctx.key, ctx.job.id);
      return j.status === 'queued' && j;
    }, 'run taken over by the sweeper');
    expect(waiting).toMatchObject({ attempt: 2, attempts: 2, takeovers: 1, agent_id: null, error: null, queue_position: 1 });
    expect(waiting.queued_at).toBe((await app.db.transfers.findById(ctx.job.id).lean())!.queued_at!.toISOString());
    expect(waiting.last_interruption).toEqual({
      attempt: 1, agent_id: ctx.agent.id, reason: expect.stringMatching(new RegExp(`^Agent ${ctx.agent.name} stopped responding \\(\\d+ s without contact\\)$`)), at: expect.any(String),
    });
    // Nothing terminal: no transfer.failed event; its slot was released.
    expect(await app.db.outboxEvents.countDocuments({ type: 'transfer.failed', 'data.id': ctx.job.id })).toBe(0);
    // Released right after the takeover's state change (queue-states.ts interrupt): a read can fall in between.
    await eventually(async () => (await app.db.agentSlots.countDocuments({ job_id: new Types.ObjectId(ctx.job.id) })) === 0, 'its slot released');
    await transferAction(app, ctx.key, ctx.job.id, 'cancel');
  });

  test('while the agent stays connected, its job\'s lease is renewed', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    const first = (await app.db.transfers.findById(ctx.job.id).lean())!.lease!;
    expect(first.instance_id).toBe(app.agentHub.instanceId);
    await eventually(async () => {
      const lease = (await app.db.transfers.findById(ctx.job.id).lean())!.lease;
      return lease && lease.expires_at > first.expires_at;
    }, 'lease renewed');
    expect((await getTransfer(app, ctx.key, ctx.job.id)).status).toBe('in-progress');
    ctx.client.close();
  });

  test('reconnect: jobs still wanted keep running; the others are listed in abort_jobs', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    const cancelled = await makeTransfer(app, ctx.key, ctx.src.id, ctx.dst.id);
    await transferAction(app, ctx.key, cancelled.id, 'cancel');
    const unknown = String(new Types.ObjectId());
    ctx.client.close();
    await ctx.client.closed;

    const { client, welcome } = await ProtocolClient.connect(app, ctx.agent.token, { running_jobs: [ctx.job.id, cancelled.id, unknown] });
    expect(welcome.abort_jobs.sort()).toEqual([cancelled.id, unknown].sort());
    client.send('job.progress', { job_id: ctx.job.id, ...counters(1, 1, 7), listing_done: true, files: files(0, 1) });
    client.send('job.completed', { job_id: ctx.job.id, ...counters(1, 1, 7) });
    await eventually(async () => (await getTransfer(app, ctx.key, ctx.job.id)).status === 'completed', 'job completed after reconnect');
    expect(client.all('job.assign')).toEqual([]);
    client.close();
  });

  test('reconnect after a restart: an accepted job the agent no longer runs is taken over (attempt 2, resume); one never accepted is sent again', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    const second = await makeTransfer(app, ctx.key, ctx.src.id, ctx.dst.id);
    await transferAction(app, ctx.key, second.id, 'execute', '?wait=false');
    await ctx.client.next('job.assign');
    ctx.client.ws.terminate();
    await ctx.client.closed;

    const { client, welcome } = await ProtocolClient.connect(app, ctx.agent.token, { running_jobs: [] });
    expect(welcome.abort_jobs).toEqual([]);
    // The resync ping: its pong tells the control plane that no held report is still coming.
    client.send('pong', { request_id: (await client.next('ping')).payload.request_id });
    const assigns = [(await client.next('job.assign')).payload, (await client.next('job.assign')).payload];
    expect(assigns.map((a) => [a.job_id, a.attempt, a.resume]).sort()).toEqual([[ctx.job.id, 2, true], [second.id, 1, false]].sort());
    expect(await getTransfer(app, ctx.key, ctx.job.id)).toMatchObject({
      status: 'in-progress', attempt: 2, takeovers: 1, last_interruption: { attempt: 1, reason: `Agent ${ctx.agent.name} restarted and lost the run` },
    });
    client.close();
  });

  test('a job that ended while the agent was away: the report it held, sent after the welcome, applies', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    ctx.client.ws.terminate();
    await ctx.client.closed;

    const { client } = await ProtocolClient.connect(app, ctx.agent.token, { running_jobs: [] });
    client.send('job.progress', { job_id: ctx.job.id, ...counters(2, 2, 20), listing_done: true, files: files(0, 2) });
    client.send('job.completed', { job_id: ctx.job.id, ...counters(2, 2, 20) });
    client.send('pong', { request_id: (await client.next('ping')).payload.request_id });
    await eventually(async () => (await getTransfer(app, ctx.key, ctx.job.id)).status === 'completed', 'held report applied');
    expect(await getTransfer(app, ctx.key, ctx.job.id)).toMatchObject({ files_transferred: 2, bytes_transferred: 20, error: null });
    client.close();
  });

  test('an invalid frame during a job closes the socket with protocolError and changes no job', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    const before = await getTransfer(app, ctx.key, ctx.job.id);
    ctx.client.sendRaw(JSON.stringify({ v: 1, type: 'job.progress', id: 'x', payload: { job_id: ctx.job.id, files_total: -1 } }));
    expect((await ctx.client.closed).code).toBe(CloseCodes.protocolError);
    const after = await getTransfer(app, ctx.key, ctx.job.id);
    expect(after).toMatchObject({ status: 'in-progress', files_total: before.files_total, files_transferred: before.files_transferred });
  });

  test('reports about a job from another agent change nothing; that agent is told to stop', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    const other = await makeAgent(app, ctx.key);
    const { client: intruder } = await ProtocolClient.connect(app, other.token);
    intruder.send('job.progress', { job_id: ctx.job.id, ...counters(99, 99, 99), listing_done: true, files: files(0, 1) });
    intruder.send('job.completed', { job_id: ctx.job.id, ...counters(99, 99, 99) });
    expect((await intruder.next('job.cancel')).payload).toEqual({ job_id: ctx.job.id });
    const ping = app.inject({ method: 'POST', url: `/api/v1/agents/${other.id}/test`, headers: auth(ctx.key) });
    intruder.send('pong', { request_id: (await intruder.next('ping')).payload.request_id });
    await ping;
    expect(await getTransfer(app, ctx.key, ctx.job.id)).toMatchObject({ status: 'in-progress', files_total: 0, files_transferred: 0 });
    expect(await app.db.transferFiles.countDocuments({ job_id: new Types.ObjectId(ctx.job.id) })).toBe(0);
    intruder.close();
    ctx.client.close();
  });

  test('revoking the agent fails its running job and closes its socket', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    await app.inject({ method: 'DELETE', url: `/api/v1/agents/${ctx.agent.id}`, headers: auth(ctx.key) });
    expect((await ctx.client.closed).code).toBe(CloseCodes.revoked);
    expect(await getTransfer(app, ctx.key, ctx.job.id)).toMatchObject({ status: 'failed', error: `Agent ${ctx.agent.name} was revoked while the job was running` });
  });

  test('the agent with the most free slots gets the next job', async () => {
    const ctx = await setup();
    await startAndAssign(ctx);
    const idle = await makeAgent(app, ctx.key);
    const { client } = await ProtocolClient.connect(app, idle.token);
    const next = await makeTransfer(app, ctx.key, ctx.src.id, ctx.dst.id);
    await transferAction(app, ctx.key, next.id, 'execute', '?wait=false');
    expect((await client.next('job.assign')).payload.job_id).toBe(next.id);
    expect((await getTransfer(app, ctx.key, next.id)).agent_id).toBe(idle.id);
    client.close();
    ctx.client.close();
  });
});

import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, expectError, loopPasses, type TestAccount } from './helper.js';
import { counters, getAgent, getTransfer, makeAgent, makeConnection, makeTransfer, transferAction, updateAgent } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/**
 * The queue (issue 14): execute makes a transfer wait; it starts when an agent that may run it
 * has a free slot, oldest first within an account, and no account's backlog delays another's.
 * Agents are fake (ProtocolClient): what is tested is the control plane's side.
 */
let app: App;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200, jobLeaseMs: 2_000 });
  await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => app.close());

/**
 * Two whole passes of the coordination loop from now on: each schedules, then dispatches, so what
 * has not started by then is waiting (a start is in the database, and its assign sent, by the end of its pass).
 */
const settle = () => loopPasses(app.dispatcher, 'tick', 2);

/** A fresh account with one connected agent announcing `maxJobs`, and connections from sftp to s3. */
async function setup(maxJobs = 4) {
  const account = await createAccount(app);
  const key = account.apiKey;
  const agent = await makeAgent(app, key);
  const { client } = await ProtocolClient.connect(app, agent.token, { max_jobs: maxJobs });
  const src = await makeConnection(app, key, 'sftp');
  const dst = await makeConnection(app, key, 's3');
  return { account, key, agent, client, src, dst };
}
type Ctx = Awaited<ReturnType<typeof setup>>;

/** `count` transfers of the context, executed without waiting, in this order. */
async function executeMany(ctx: Pick<Ctx, 'key' | 'src' | 'dst'>, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const job = await makeTransfer(app, ctx.key, ctx.src.id, ctx.dst.id);
    const res = await transferAction(app, ctx.key, job.id, 'execute', '?wait=false');
    expect(res.statusCode).toBe(202);
    ids.push(job.id);
  }
  return ids;
}

/** The agent runs the job it was given to completion. */
function complete(client: ProtocolClient, jobId: string): void {
  client.send('job.accepted', { job_id: jobId });
  client.send('job.completed', { job_id: jobId, ...counters(1, 1, 10) });
}

const assigned = (client: ProtocolClient) => client.all('job.assign').map((m) => m.payload.job_id);

test('an agent with 2 slots gets 2 of 5 waiting transfers at a time, oldest first; each end starts the next; queue positions count down', async () => {
  const ctx = await setup(2);
  const ids = await executeMany(ctx, 5);
  await eventually(async () => assigned(ctx.client).length === 2, 'two assigns');
  await settle();
  expect(assigned(ctx.client)).toEqual(ids.slice(0, 2));
  expect((await getTransfer(app, ctx.key, ids[2]!))).toMatchObject({ status: 'queued', queue_position: 1 });
  expect((await getTransfer(app, ctx.key, ids[4]!))).toMatchObject({ status: 'queued', queue_position: 3, agent_id: null });
  expect((await getAgent(app, ctx.key, ctx.agent.id)).slots).toEqual({ total: 2, running: 2, free: 0 });
  const list = (await app.inject({ method: 'GET', url: '/api/v1/transfers?status=queued', headers: auth(ctx.key) })).json().data;
  expect(list.map((t: { id: string; queue_position: number }) => [t.id, t.queue_position])).toEqual([[ids[4], 3], [ids[3], 2], [ids[2], 1]]);

  for (let done = 0; done < 5; done++) {
    complete(ctx.client, ids[done]!);
    await eventually(async () => (await getTransfer(app, ctx.key, ids[done]!)).status === 'completed', `transfer ${done} completed`);
    const expected = Math.min(5, done + 3);
    await eventually(async () => assigned(ctx.client).length === expected, `${expected} assigns`);
    // Never more runs than slots: assigns minus the completed ones.
    expect(assigned(ctx.client).length - (done + 1)).toBeLessThanOrEqual(2);
  }
  expect(assigned(ctx.client)).toEqual(ids);
  // Released right after the last one's state changed (transfer-states.ts ended()).
  await eventually(async () => (await app.db.agentSlots.countDocuments({ agent_id: new Types.ObjectId(ctx.agent.id) })) === 0, 'every slot released');
  expect(await app.db.transferQueue.countDocuments({ account_id: new Types.ObjectId(ctx.account.accountId) })).toBe(0);
  ctx.client.close();
});

test('PUT /agents/:id max_jobs lowers and raises the limit live, bounded by the agent\'s own; audited with what changed', async () => {
  const ctx = await setup(4);
  const lowered = await updateAgent(app, ctx.key, ctx.agent.id, { max_jobs: 1 });
  expect(lowered.statusCode).toBe(200);
  expect(lowered.json().data).toMatchObject({ max_jobs: 1, agent_max_jobs: 4, slots: { total: 1, running: 0, free: 1 } });
  const ids = await executeMany(ctx, 4);
  await eventually(async () => assigned(ctx.client).length === 1, 'one assign');
  await settle();
  expect(assigned(ctx.client)).toEqual([ids[0]]);
  // A start is in the database by the end of its pass (its assign may still be on the way).
  expect(await getTransfer(app, ctx.key, ids[1]!)).toMatchObject({ status: 'queued', queue_position: 1 });

  // Raised: two more start at once.
  await updateAgent(app, ctx.key, ctx.agent.id, { max_jobs: 3 });
  await eventually(async () => assigned(ctx.client).length === 3, 'three assigns');
  // Lowered below what runs: the runs go on, and nothing starts until fewer than the limit run.
  await updateAgent(app, ctx.key, ctx.agent.id, { max_jobs: 1 });
  complete(ctx.client, ids[0]!);
  await eventually(async () => (await getTransfer(app, ctx.key, ids[0]!)).status === 'completed', 'first completed');
  await settle();
  expect(assigned(ctx.client)).toHaveLength(3);
  expect((await getAgent(app, ctx.key, ctx.agent.id)).slots).toEqual({ total: 1, running: 2, free: 0 });
  complete(ctx.client, ids[1]!);
  complete(ctx.client, ids[2]!);
  await eventually(async () => assigned(ctx.client).length === 4, 'the fourth starts once nothing runs');

  // Above the agent's own --max-jobs: bounded by it. null: the agent's own alone.
  expect((await updateAgent(app, ctx.key, ctx.agent.id, { max_jobs: 10 })).json().data).toMatchObject({ max_jobs: 10, slots: { total: 4 } });
  expect((await updateAgent(app, ctx.key, ctx.agent.id, { max_jobs: null })).json().data).toMatchObject({ max_jobs: null, agent_max_jobs: 4, slots: { total: 4 } });
  const audits = await app.db.auditEvents.find({ action: 'agent.update', 'resource.id': ctx.agent.id }).sort({ _id: 1 }).lean();
  expect(audits.map((a) => a.details)).toEqual([
    { name: ctx.agent.name, changed: { max_jobs: { from: null, to: 1 } } },
    { name: ctx.agent.name, changed: { max_jobs: { from: 1, to: 3 } } },
    { name: ctx.agent.name, changed: { max_jobs: { from: 3, to: 1 } } },
    { name: ctx.agent.name, changed: { max_jobs: { from: 1, to: 10 } } },
    { name: ctx.agent.name, changed: { max_jobs: { from: 10, to: null } } },
  ]);
  ctx.client.close();
});

test('PUT /agents/:id: name, labels; 400 naming the field; 409 for a taken name; 404 for another account\'s agent; agents:write', async () => {
  const ctx = await setup();
  const other = await makeAgent(app, ctx.key);
  const res = await updateAgent(app, ctx.key, ctx.agent.id, { name: 'renamed-agent', labels: ['eu-west', 'gpu'] });
  expect(res.statusCode).toBe(200);
  expect(res.json().data).toMatchObject({ name: 'renamed-agent', labels: ['eu-west', 'gpu'], pools: ['eu-west', 'gpu'], status: 'online' });
  expectError(await updateAgent(app, ctx.key, ctx.agent.id, { max_jobs: 0 }), 400, /^body\.max_jobs /);
  expectError(await updateAgent(app, ctx.key, ctx.agent.id, { max_jobs: 'many' }), 400, /^body\.max_jobs /);
  expectError(await updateAgent(app, ctx.key, ctx.agent.id, { labels: ['bad label'] }), 400, /^body\.labels\.0 /);
  expectError(await updateAgent(app, ctx.key, ctx.agent.id, { token: 'agt_x' }), 400, /unknown field 'token'/);
  expectError(await updateAgent(app, ctx.key, ctx.agent.id, {}), 400);
  expectError(await updateAgent(app, ctx.key, ctx.agent.id, { name: other.name }), 409, `An agent named '${other.name}' already exists`);
  const stranger: TestAccount = await createAccount(app);
  expectError(await updateAgent(app, stranger.apiKey, ctx.agent.id, { name: 'mine' }), 404, `Agent ${ctx.agent.id} not found`);
  const audit = await app.db.auditEvents.findOne({ action: 'agent.update', 'resource.id': ctx.agent.id }).lean();
  expect(audit!.details).toEqual({ name: 'renamed-agent', changed: { name: { from: ctx.agent.name, to: 'renamed-agent' }, labels: { from: [], to: ['eu-west', 'gpu'] } } });
  ctx.client.close();
});

test('fair across accounts: one account\'s 105 waiting transfers delay neither another account\'s one nor its own transfer for a free agent behind them', async () => {
  const busy = await setup(1);
  // The backlog is pinned to the busy agent: nothing else may run it.
  const pinnedToBusy = {
    src: await makeConnection(app, busy.key, 'sftp', { agent_id: busy.agent.id }), dst: await makeConnection(app, busy.key, 's3', { agent_id: busy.agent.id }),
  };
  const backlog = await executeMany({ key: busy.key, ...pinnedToBusy }, 105);
  await eventually(async () => assigned(busy.client).length === 1, 'the busy agent runs one');
  // In the same account, a transfer for a second, idle agent: 106th in the queue (a page of the
  // queue further on than the scheduler reads at once), it starts at once.
  const second = await makeAgent(app, busy.key);
  const { client: secondClient } = await ProtocolClient.connect(app, second.token, { max_jobs: 1 });
  const pinnedToSecond = {
    src: await makeConnection(app, busy.key, 'sftp', { agent_id: second.id }), dst: await makeConnection(app, busy.key, 's3', { agent_id: second.id }),
  };
  const behind = (await executeMany({ key: busy.key, ...pinnedToSecond }, 1))[0]!;
  expect((await secondClient.next('job.assign')).payload.job_id).toBe(behind);

  // Another account's one transfer starts on its agent as if the backlog were not there.
  const quiet = await setup(1);
  const [mine] = await executeMany(quiet, 1);
  expect((await quiet.client.next('job.assign')).payload.job_id).toBe(mine);
  expect(assigned(busy.client)).toEqual([backlog[0]]);
  expect((await getTransfer(app, busy.key, backlog[104]!)).queue_position).toBe(104);
  for (const c of [busy.client, secondClient, quiet.client]) c.close();
}, 120_000); // 106 transfers created and executed one by one: minutes on a loaded 2-core machine

test('cancel and delete of a waiting transfer: it leaves the queue, the ones behind it move up; execute on a waiting one is 409', async () => {
  const ctx = await setup(1);
  const ids = await executeMany(ctx, 3);
  await eventually(async () => assigned(ctx.client).length === 1, 'one assign');
  expect((await getTransfer(app, ctx.key, ids[2]!)).queue_position).toBe(2);
  expectError(await transferAction(app, ctx.key, ids[1]!, 'execute'), 409,
    `Transfer ${ids[1]} was executed already and waits for an agent; follow it with GET /transfers/${ids[1]}`);
  expectError(await transferAction(app, ctx.key, ids[1]!, 'retry'), 409, `Transfer ${ids[1]} is queued; only failed or cancelled transfers can be retried`);
  expectError(await app.inject({ method: 'DELETE', url: `/api/v1/transfers/${ids[1]}`, headers: auth(ctx.key) }), 409, /is queued; only completed, failed or cancelled/);

  const cancelled = await transferAction(app, ctx.key, ids[1]!, 'cancel');
  expect(cancelled.json().data).toMatchObject({ status: 'cancelled', queue_position: null });
  expect(await app.db.transferQueue.countDocuments({ _id: new Types.ObjectId(ids[1]) })).toBe(0);
  expect((await getTransfer(app, ctx.key, ids[2]!)).queue_position).toBe(1);
  expect((await app.inject({ method: 'DELETE', url: `/api/v1/transfers/${ids[1]}`, headers: auth(ctx.key) })).statusCode).toBe(200);

  complete(ctx.client, ids[0]!);
  // The cancelled one never runs: the next assign is the third.
  expect((await ctx.client.next('job.assign')).payload.job_id).toBe(ids[0]);
  expect((await ctx.client.next('job.assign')).payload.job_id).toBe(ids[2]);
  expect(assigned(ctx.client)).not.toContain(ids[1]);
  ctx.client.close();
});

test('a blocking execute waits in the queue, then for the run, and answers its end', async () => {
  const ctx = await setup(1);
  const [first] = await executeMany(ctx, 1);
  expect((await ctx.client.next('job.assign')).payload.job_id).toBe(first);
  const second = await makeTransfer(app, ctx.key, ctx.src.id, ctx.dst.id);
  const pending = transferAction(app, ctx.key, second.id, 'execute');
  await eventually(async () => (await getTransfer(app, ctx.key, second.id)).queue_position === 1, 'second waits');
  complete(ctx.client, first!);
  await eventually(async () => assigned(ctx.client).includes(second.id), 'second assigned');
  complete(ctx.client, second.id);
  expect((await pending).json()).toEqual({ success: true, files_transferred: 1, bytes_transferred: 10 });
  ctx.client.close();
});

test('a start whose writes fail after the claim leaves the transfer waiting, its slot free; it starts on a later pass', async () => {
  const ctx = await setup(1);
  const slots = app.transfers.slots;
  const claim = slots.claim.bind(slots);
  let failures = 0;
  slots.claim = async (c) => {
    if (failures++ === 0) throw new Error('the database is unreachable');
    return claim(c);
  };
  try {
    const [id] = await executeMany(ctx, 1);
    expect((await ctx.client.next('job.assign')).payload.job_id).toBe(id);
    expect(failures).toBeGreaterThanOrEqual(2);
    expect(await getTransfer(app, ctx.key, id!)).toMatchObject({ status: 'in-progress', attempts: 1 });
    expect(await app.db.agentSlots.countDocuments({ agent_id: new Types.ObjectId(ctx.agent.id) })).toBe(1);
    complete(ctx.client, id!);
  } finally {
    slots.claim = claim;
    ctx.client.close();
  }
});

test('a start that read the transfer just before the execute that inserted its entry changed it puts the entry back: the transfer starts', async () => {
  const ctx = await setup(1);
  const job = await makeTransfer(app, ctx.key, ctx.src.id, ctx.dst.id);
  const _id = new Types.ObjectId(job.id);
  const stored = (await app.db.transfers.findById(_id).lean())!;
  // An execute half-way: its entry inserted, the transfer not yet waiting (queued_at null). The
  // scheduler claims the entry and its start finds the transfer not waiting; the execute's
  // update lands right then (while the start undoes its slot claim), before the start decides
  // whether the entry goes back.
  const slots = app.transfers.slots;
  const release = slots.release.bind(slots);
  let raced = false;
  slots.release = async (jobId, attempt) => {
    if (!raced && String(jobId) === job.id) {
      raced = true;
      await app.db.transfers.updateOne({ _id }, { $set: { queued_at: new Date() } });
    }
    return release(jobId, attempt);
  };
  try {
    const now = new Date();
    await app.db.transferQueue.collection.insertOne({
      _id, account_id: stored.account_id, queued_at: now, attempt: 1, source_connection_id: stored.source_connection_id,
      destination_connection_id: stored.destination_connection_id, entered_at: now, orphaned_since: null, not_before: null,
    });
    expect((await ctx.client.next('job.assign')).payload.job_id).toBe(job.id);
    expect(raced).toBe(true);
    complete(ctx.client, job.id);
  } finally {
    slots.release = release;
    ctx.client.close();
  }
});

test('a waiting transfer whose queue entry was lost (its instance died between the claim and the start) waits again after two sweeps', async () => {
  const ctx = await setup(1);
  const [first, second] = await executeMany(ctx, 2);
  expect((await ctx.client.next('job.assign')).payload.job_id).toBe(first);
  const entry = await app.db.transferQueue.findById(second).lean();
  await app.db.transferQueue.deleteOne({ _id: new Types.ObjectId(second) });
  const missing = new Set<string>();
  // First sweep: missing, maybe only for the moment of a start.
  await app.transfers.requeueLost(missing);
  expect(missing.has(second!)).toBe(true);
  expect(await app.db.transferQueue.countDocuments({ _id: new Types.ObjectId(second) })).toBe(0);
  // Still missing on the next: lost; it gets its entry back, in its old place.
  expect(await app.transfers.requeueLost(missing)).toBeGreaterThanOrEqual(1);
  expect(await app.db.transferQueue.findById(second).lean()).toMatchObject({ attempt: 1, queued_at: entry!.queued_at, account_id: entry!.account_id });
  expect(missing.has(second!)).toBe(false);
  complete(ctx.client, first!);
  expect((await ctx.client.next('job.assign')).payload.job_id).toBe(second);
  complete(ctx.client, second!);
  await eventually(async () => (await getTransfer(app, ctx.key, second!)).status === 'completed', 'second completed');
  ctx.client.close();
});

test('metrics: the queue depth counts the transfers waiting for an agent', async () => {
  const ctx = await setup(1);
  const depth = async () => {
    const text = await app.metrics.render();
    return Number(/^xfer_transfer_queue_depth (\d+)$/m.exec(text)![1]);
  };
  await executeMany(ctx, 3);
  await eventually(async () => assigned(ctx.client).length === 1, 'one assign');
  expect(await app.db.transferQueue.countDocuments({ account_id: new Types.ObjectId(ctx.account.accountId) })).toBe(2);
  // Other tests' transfers may be waiting too: the gauge is the whole queue, read when scraped.
  await eventually(async () => (await depth()) === await app.db.transferQueue.countDocuments({}), 'the gauge shows the queue');
  ctx.client.close();
});

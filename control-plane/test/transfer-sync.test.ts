import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, expectError } from './helper.js';
import { counters, getTransfer, makeAgent, makeConnection, makeTransfer, transferAction } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

// Issue 25 on the control plane: the sync options checked and defaulted, jobs using them sent only
// to agents that said hello.sync, deleted results and counters stored and reported, and plans:
// computed by an agent playing the protocol here, stored, read, executed and paged back.

let app: App;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200 });
  await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => app.close());

const SYNC = { mode: 'sync', compare: 'size_mtime', filters: { rules: ['- *.tmp', '+ **'] }, max_delete: 10 };

async function setup(options: Record<string, unknown> = SYNC, hello: Record<string, unknown> = { sync: true }) {
  const account = await createAccount(app);
  const agent = await makeAgent(app, account.apiKey);
  const { client } = await ProtocolClient.connect(app, agent.token, hello);
  const src = await makeConnection(app, account.apiKey, 'sftp');
  const dst = await makeConnection(app, account.apiKey, 's3');
  const job = await makeTransfer(app, account.apiKey, src.id, dst.id, { options });
  return { account, key: account.apiKey, agent, client, src, dst, job };
}
type Ctx = Awaited<ReturnType<typeof setup>>;

const post = (key: string, url: string, payload?: unknown) =>
  app.inject({ method: 'POST', url: `/api/v1${url}`, headers: auth(key), ...(payload !== undefined ? { payload: payload as object } : {}) });
const get = (key: string, url: string) => app.inject({ method: 'GET', url: `/api/v1${url}`, headers: auth(key) });

const item = (path: string, action: 'copy' | 'update' | 'delete' | 'skip', size = 10) => ({
  path, action, reason: `${action} reason`, ...(action === 'delete' ? { destination: { size } } : { source: { size, mtime: '2026-01-01T00:00:00.000Z' } }),
});
type PlanItemLike = { path: string };
const SUMMARY = { copy: 3, update: 1, delete: 1, skip: 0, copy_bytes: 30, update_bytes: 10, delete_bytes: 10 };
const FINGERPRINT = 'a'.repeat(64);

/** Asks for a plan without waiting, answers it as the agent (items in two batches, one sent twice) and returns its id. */
async function readyPlan(ctx: Ctx): Promise<string> {
  const res = await post(ctx.key, `/transfers/${ctx.job.id}/plan?wait=false`);
  expect(res.statusCode).toBe(202);
  const planId = res.json().data.id as string;
  const assign = await eventually(async () => ctx.client.all('plan.assign').find((m) => m.payload.plan_id === planId), 'plan.assign');
  ctx.client.send('plan.items', { plan_id: planId, seq: 1, items: [item('a.txt', 'copy'), item('b/c.txt', 'update'), item('b/d.txt', 'copy')] });
  ctx.client.send('plan.items', { plan_id: planId, seq: 2, items: [item('old.txt', 'delete'), item('z.txt', 'copy')] });
  ctx.client.send('plan.items', { plan_id: planId, seq: 1, items: [item('a.txt', 'copy'), item('b/c.txt', 'update'), item('b/d.txt', 'copy')] });
  ctx.client.send('plan.done', { plan_id: planId, batches: 2, summary: SUMMARY, fingerprint: FINGERPRINT });
  await eventually(async () => (await get(ctx.key, `/transfers/${ctx.job.id}/plan`)).json().data.status === 'ready', 'plan ready');
  expect(assign.payload).toMatchObject({ source_path: '/in', destination_path: '/out', options: { mode: 'sync', max_delete: 10, filters: SYNC.filters } });
  return planId;
}

describe('options', () => {
  test('every new option is checked when stored: a 400 naming the field', async () => {
    const ctx = await setup({});
    const create = (options: Record<string, unknown>) => post(ctx.key, '/transfers', {
      name: 'x', sourceConnectionId: ctx.src.id, sourcePath: '/in', destinationConnectionId: ctx.dst.id, destinationPath: '/out', options,
    });
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ mode: 'mirror' }, /mode/],
      [{ compare: 'mtime' }, /compare/],
      [{ filters: { rules: [''] } }, /rules/],
      [{ filters: { min_size: 10, max_size: 5 } }, /^body\.options\.filters\.min_size \(10\) is larger than body\.options\.filters\.max_size \(5\)/],
      [{ filters: { min_age: 100, max_age: 5 } }, /^body\.options\.filters\.min_age/],
      [{ filters: { min_size: -1 } }, /min_size/],
      [{ filters: { colour: 'red' } }, /colour|additional/],
      [{ mode: 'sync', max_delete: '200%' }, /max_delete/],
      [{ max_delete: 5 }, /^body\.options\.max_delete applies to mode sync only \(mode is copy\)/],
      [{ mode: 'move', max_delete: '10%' }, /^body\.options\.max_delete applies to mode sync only \(mode is move\)/],
      [{ bandwidth_limit: 10 }, /bandwidth_limit/],
      [{ max_duration: 0 }, /max_duration/],
      [{ window: { start: '25:00', end: '06:00', tz: 'UTC' } }, /window/],
      [{ window: { start: '22:00', end: '06:00', tz: 'Mars/Olympus' } }, /^body\.options\.window\.tz is not a known IANA time zone: 'Mars\/Olympus'/],
      [{ window: { start: '22:00', end: '22:00', tz: 'UTC' } }, /^body\.options\.window\.start and body\.options\.window\.end are the same time/],
      [{ cutoff: 'gentle' }, /cutoff/],
    ];
    for (const [options, message] of cases) expectError(await create(options), 400, message);
    expect(await app.db.transfers.countDocuments({ account_id: new Types.ObjectId(ctx.account.accountId) })).toBe(1);
  });

  test('defaults are filled in, and a transfer stored before them presents them too', async () => {
    const ctx = await setup({ overwrite: 'always' });
    const fresh = await getTransfer(app, ctx.key, ctx.job.id);
    expect(fresh.options).toEqual({ overwrite: 'always', verify: 'checksum', concurrency: 8, mode: 'copy', compare: 'size_mtime', cutoff: 'hard' });
    expect(fresh.files_deleted).toBe(0);
    await app.db.transfers.collection.updateOne({ _id: new Types.ObjectId(ctx.job.id) }, { $unset: { 'options.mode': 1, 'options.compare': 1, 'options.cutoff': 1, files_deleted: 1 } });
    const old = await getTransfer(app, ctx.key, ctx.job.id);
    expect(old.options).toEqual(fresh.options);
    expect(old.files_deleted).toBe(0);
    const full = await makeTransfer(app, ctx.key, ctx.src.id, ctx.dst.id, {
      options: { ...SYNC, bandwidth_limit: 1_048_576, max_duration: 3600, window: { start: '22:00', end: '06:00', tz: 'Europe/Paris' }, cutoff: 'soft' },
    });
    expect((await getTransfer(app, ctx.key, full.id)).options).toEqual({
      overwrite: 'if_changed', verify: 'checksum', concurrency: 8, ...SYNC, bandwidth_limit: 1_048_576, max_duration: 3600,
      window: { start: '22:00', end: '06:00', tz: 'Europe/Paris' }, cutoff: 'soft',
    });
  });

  test('schedules, watchers and workflow transfer steps check the options and pass them on', async () => {
    const ctx = await setup({});
    const transfer = { sourceConnectionId: ctx.src.id, sourcePath: '/in', destinationConnectionId: ctx.dst.id, destinationPath: '/out' };
    expectError(await post(ctx.key, '/schedules', { name: 's', cron: '0 3 * * *', transfer: { ...transfer, options: { max_delete: 3 } } }), 400,
      /^transfer\.options\.max_delete applies to mode sync only/);
    expectError(await post(ctx.key, '/workflows', { name: 'w', steps: [{ type: 'transfer', ...transfer, options: { window: { start: '01:00', end: '02:00', tz: 'Nowhere/City' } } }] }), 400,
      /^steps\[0\]\.options\.window\.tz is not a known IANA time zone/);
    const watcher = { name: 'wt', connectionId: ctx.src.id, path: '/in', action: { transfer: { destinationConnectionId: ctx.dst.id, destinationPath: '/out', options: { mode: 'sync' } } } };
    expectError(await post(ctx.key, '/watchers', watcher), 400, /^action\.transfer\.options\.mode sync is not available to a watcher/);

    const schedule = await post(ctx.key, '/schedules', { name: 's', cron: '0 3 * * *', transfer: { ...transfer, options: SYNC } });
    expect(schedule.statusCode).toBe(201);
    expect(schedule.json().data.transfer.options).toMatchObject(SYNC);
    const run = await post(ctx.key, `/schedules/${schedule.json().data.id}/run`);
    expect(run.statusCode).toBeLessThan(300);
    const made = await eventually(async () => app.db.transfers.findOne({ account_id: new Types.ObjectId(ctx.account.accountId), _id: { $ne: new Types.ObjectId(ctx.job.id) } }).lean(), 'the schedule made a transfer');
    expect(made.options).toMatchObject(SYNC);
  });
});

describe('agents without hello.sync', () => {
  test('never get a job that uses the new options; it waits for (and goes to) one that does', async () => {
    const ctx = await setup(SYNC, {});
    expectError(await transferAction(app, ctx.key, ctx.job.id, 'execute', '?wait=false'), 503, /hello\.sync/);
    // A plain copy still runs on it.
    const plain = await makeTransfer(app, ctx.key, ctx.src.id, ctx.dst.id);
    expect((await transferAction(app, ctx.key, plain.id, 'execute', '?wait=false')).statusCode).toBe(202);
    const plainAssign = (await ctx.client.next('job.assign')).payload;
    expect(plainAssign.options).toEqual({ overwrite: 'if_changed', verify: 'checksum', concurrency: 8 });

    const syncAgent = await makeAgent(app, ctx.key);
    const { client: syncClient } = await ProtocolClient.connect(app, syncAgent.token, { sync: true });
    expect((await transferAction(app, ctx.key, ctx.job.id, 'execute', '?wait=false')).statusCode).toBe(202);
    const assign = (await syncClient.next('job.assign')).payload;
    expect(assign).toMatchObject({ job_id: ctx.job.id, options: { ...SYNC, overwrite: 'if_changed', cutoff: 'hard' } });
    expect(assign.plan_id).toBeUndefined();
    expect(ctx.client.all('job.assign').map((m) => m.payload.job_id)).toEqual([plain.id]);
    syncClient.close();
  });

  test('a waiting sync job is left to the busy agent with hello.sync, never started on a free one without it', async () => {
    const ctx = await setup(SYNC, { sync: true, max_jobs: 1 });
    // The sync agent's one slot is taken by a plain copy.
    const plain = await makeTransfer(app, ctx.key, ctx.src.id, ctx.dst.id);
    expect((await transferAction(app, ctx.key, plain.id, 'execute', '?wait=false')).statusCode).toBe(202);
    expect((await ctx.client.next('job.assign')).payload.job_id).toBe(plain.id);
    ctx.client.send('job.accepted', { job_id: plain.id });
    const other = await makeAgent(app, ctx.key);
    const { client: old } = await ProtocolClient.connect(app, other.token, { max_jobs: 4 });
    expect((await transferAction(app, ctx.key, ctx.job.id, 'execute', '?wait=false')).statusCode).toBe(202);
    expect(await app.transfers.queue.get(ctx.job.id)).toMatchObject({ needs_sync: true, direct_only: false });
    // Once the sync agent's slot is free, the job goes there; the free agent without sync got nothing meanwhile.
    ctx.client.send('job.completed', { job_id: plain.id, ...counters(0, 0, 0) });
    expect((await ctx.client.next('job.assign')).payload.job_id).toBe(ctx.job.id);
    expect(old.all('job.assign')).toEqual([]);
    old.close();
  });
});

describe('deleted results', () => {
  test('files_deleted and deleted results (with their reason) are stored, listed, and in the execute answer and the event', async () => {
    const ctx = await setup({ mode: 'move' });
    const execution = post(ctx.key, `/transfers/${ctx.job.id}/execute`);
    await ctx.client.next('job.assign');
    ctx.client.send('job.accepted', { job_id: ctx.job.id });
    ctx.client.send('job.progress', {
      job_id: ctx.job.id, ...counters(2, 2, 20), files_deleted: 2, listing_done: true,
      files: [
        { path: 'a.txt', status: 'copied', size: 10 }, { path: 'a.txt', status: 'deleted', size: 10, reason: 'moved' },
        { path: 'b.txt', status: 'copied', size: 10 }, { path: 'b.txt', status: 'deleted', size: 10, reason: 'moved' },
      ],
    });
    ctx.client.send('job.completed', { job_id: ctx.job.id, ...counters(2, 2, 20), files_deleted: 2 });
    const res = await execution;
    expect(res.json()).toEqual({ success: true, files_transferred: 2, bytes_transferred: 20, files_deleted: 2 });
    expect((await getTransfer(app, ctx.key, ctx.job.id)).files_deleted).toBe(2);
    const deleted = (await get(ctx.key, `/transfers/${ctx.job.id}/files?status=deleted`)).json().data;
    expect(deleted.map((f: { path: string; reason: string; size: number }) => [f.path, f.reason, f.size]).sort()).toEqual([['a.txt', 'moved', 10], ['b.txt', 'moved', 10]]);
    expect((await get(ctx.key, `/transfers/${ctx.job.id}/files?status=copied`)).json().data).toHaveLength(2);
    const event = await eventually(async () => app.db.outboxEvents.findOne({ account_id: new Types.ObjectId(ctx.account.accountId), type: 'transfer.completed' }).lean(), 'the event');
    expect(event.data).toMatchObject({ id: ctx.job.id, files_transferred: 2, files_deleted: 2 });
  });
});

describe('plans', () => {
  test('a plan is computed by the agent, stored as its frames arrive, and read back in path order', async () => {
    const ctx = await setup();
    const planId = await readyPlan(ctx);
    const plan = (await get(ctx.key, `/transfers/${ctx.job.id}/plan`)).json().data;
    expect(plan).toMatchObject({
      id: planId, transferId: ctx.job.id, status: 'ready', summary: SUMMARY, fingerprint: FINGERPRINT, agent_id: ctx.agent.id, error: null, expired: false,
    });
    expect(Date.parse(plan.expires_at) - Date.parse(plan.created_at)).toBe(3_600_000);
    // The batch sent twice is stored once.
    const first = (await get(ctx.key, `/transfers/${ctx.job.id}/plan/items?limit=2`)).json();
    expect(first.data.map((i: { path: string }) => i.path)).toEqual(['a.txt', 'b/c.txt']);
    const rest = (await get(ctx.key, `/transfers/${ctx.job.id}/plan/items?limit=10&cursor=${first.next_cursor}`)).json();
    expect(rest).toEqual({ data: [item('b/d.txt', 'copy'), item('old.txt', 'delete'), item('z.txt', 'copy')], next_cursor: null });
    const deletes = (await get(ctx.key, `/transfers/${ctx.job.id}/plan/items?action=delete`)).json().data;
    expect(deletes).toEqual([item('old.txt', 'delete')]);
    const audit = await app.db.auditEvents.findOne({ action: 'transfer.plan', 'resource.id': ctx.job.id }).lean();
    expect(audit?.details).toMatchObject({ plan_id: planId, agent_id: ctx.agent.id });
  });

  test('a plan of several full batches is paged in order across them, by the API and to the agent', async () => {
    const ctx = await setup();
    const res = await post(ctx.key, `/transfers/${ctx.job.id}/plan?wait=false`);
    const planId = res.json().data.id as string;
    await ctx.client.next('plan.assign');
    const name = (n: number) => `f${String(n).padStart(5, '0')}`;
    const batches = [1000, 1000, 5].map((size, b) => Array.from({ length: size }, (_, i) => {
      const n = b * 1000 + i;
      return item(name(n), n % 400 === 7 ? 'delete' : 'copy');
    }));
    batches.forEach((items, b) => ctx.client.send('plan.items', { plan_id: planId, seq: b + 1, items }));
    ctx.client.send('plan.done', { plan_id: planId, batches: 3, summary: SUMMARY, fingerprint: FINGERPRINT });
    await eventually(async () => (await get(ctx.key, `/transfers/${ctx.job.id}/plan`)).json().data.status === 'ready', 'plan ready');
    const all = batches.flat();

    const paths: string[] = [];
    let cursor: string | null = null;
    do {
      const page: { data: PlanItemLike[]; next_cursor: string | null } = (await get(ctx.key, `/transfers/${ctx.job.id}/plan/items?limit=300${cursor ? `&cursor=${cursor}` : ''}`)).json();
      paths.push(...page.data.map((i: PlanItemLike) => i.path));
      cursor = page.next_cursor;
    } while (cursor);
    expect(paths).toEqual(all.map((i) => i.path));
    const deletes = (await get(ctx.key, `/transfers/${ctx.job.id}/plan/items?action=delete&limit=1000`)).json();
    expect(deletes).toEqual({ data: all.filter((i) => i.action === 'delete'), next_cursor: null });

    expect((await post(ctx.key, `/transfers/${ctx.job.id}/execute?wait=false`, { plan_id: planId })).statusCode).toBe(202);
    await ctx.client.next('job.assign');
    const got: string[] = [];
    let after: string | undefined;
    for (let n = 0; ; n++) {
      ctx.client.send('job.plan.query', { job_id: ctx.job.id, request_id: `q${n}`, limit: 999, ...(after ? { after } : {}) });
      const page = (await eventually(async () => ctx.client.all('job.plan.page').find((m) => m.payload.request_id === `q${n}`), 'a page')).payload;
      got.push(...page.items.map((i) => i.path));
      after = got[got.length - 1];
      if (page.done) break;
    }
    expect(got).toEqual(all.map((i) => i.path));
  });

  test('a blocking plan request answers once the agent is done; a failed plan says why', async () => {
    const ctx = await setup();
    const pending = post(ctx.key, `/transfers/${ctx.job.id}/plan`);
    const assign = (await ctx.client.next('plan.assign')).payload;
    ctx.client.send('plan.failed', { plan_id: assign.plan_id, error: 'listing /in: permission denied' });
    const res = await pending;
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ id: assign.plan_id, status: 'failed', error: 'listing /in: permission denied', summary: null });
    expectError(await post(ctx.key, `/transfers/${ctx.job.id}/execute`, { plan_id: assign.plan_id }), 409, /failed \(listing \/in: permission denied\)/);

    // A plan whose batches did not all arrive is not ready.
    const second = post(ctx.key, `/transfers/${ctx.job.id}/plan`);
    const again = (await ctx.client.next('plan.assign')).payload;
    ctx.client.send('plan.items', { plan_id: again.plan_id, seq: 1, items: [item('a.txt', 'copy')] });
    ctx.client.send('plan.done', { plan_id: again.plan_id, batches: 2, summary: SUMMARY, fingerprint: FINGERPRINT });
    expect((await second).json().data).toMatchObject({ status: 'failed', error: 'The plan is incomplete: the agent announced 2 batches of items, 1 arrived' });
    // The older plan went when the new one was made.
    expect(await app.db.transferPlans.countDocuments({ _id: new Types.ObjectId(assign.plan_id) })).toBe(0);
  });

  test('an item path outside the roots fails the plan; an agent that disconnects fails its plan', async () => {
    const ctx = await setup();
    const res = await post(ctx.key, `/transfers/${ctx.job.id}/plan?wait=false`);
    const planId = res.json().data.id;
    await ctx.client.next('plan.assign');
    ctx.client.send('plan.items', { plan_id: planId, seq: 1, items: [item('../etc/passwd', 'copy')] });
    await eventually(async () => (await get(ctx.key, `/transfers/${ctx.job.id}/plan`)).json().data.status === 'failed', 'failed');
    expect((await get(ctx.key, `/transfers/${ctx.job.id}/plan`)).json().data.error).toMatch(/not relative to the transfer's root: "..\/etc\/passwd"/);
    expect(await app.db.transferPlanBatches.countDocuments({ plan_id: new Types.ObjectId(planId) })).toBe(0);
    // More items of a plan that failed meanwhile: the agent is told to stop.
    ctx.client.send('plan.items', { plan_id: planId, seq: 2, items: [item('x.txt', 'copy')] });
    expect((await ctx.client.next('plan.cancel')).payload).toEqual({ plan_id: planId });

    const next = (await post(ctx.key, `/transfers/${ctx.job.id}/plan?wait=false`)).json().data.id;
    await eventually(async () => ctx.client.all('plan.assign').some((m) => m.payload.plan_id === next), 'second assign');
    ctx.client.close();
    await eventually(async () => (await get(ctx.key, `/transfers/${ctx.job.id}/plan`)).json().data.status === 'failed', 'failed on disconnect');
    expect((await get(ctx.key, `/transfers/${ctx.job.id}/plan`)).json().data.error).toMatch(/disconnected while computing the plan/);
  });

  test('a plan still planning at its expiry fails, and its agent is told to stop', async () => {
    const ctx = await setup();
    const planId = (await post(ctx.key, `/transfers/${ctx.job.id}/plan?wait=false`)).json().data.id as string;
    await ctx.client.next('plan.assign');
    await app.db.transferPlans.updateOne({ _id: new Types.ObjectId(planId) }, { $set: { expires_at: new Date(Date.now() - 1) } });
    expect((await ctx.client.next('plan.cancel')).payload).toEqual({ plan_id: planId });
    expect((await get(ctx.key, `/transfers/${ctx.job.id}/plan`)).json().data).toMatchObject({
      status: 'failed', error: 'The plan was not complete before it expired (XFER_PLAN_TTL)', expired: true,
    });
  });

  test('no plan without an agent with hello.sync (503), nor for a transfer only a relay could run (409)', async () => {
    const ctx = await setup(SYNC, {});
    expectError(await post(ctx.key, `/transfers/${ctx.job.id}/plan`), 503, /hello\.sync/);
    expectError(await get(ctx.key, `/transfers/${ctx.job.id}/plan`), 404, `Transfer ${ctx.job.id} has no plan; create one with POST /transfers/${ctx.job.id}/plan`);

    const account = await createAccount(app);
    const a = await makeAgent(app, account.apiKey);
    const b = await makeAgent(app, account.apiKey);
    const { client: ca } = await ProtocolClient.connect(app, a.token, { sync: true, relay: true, connector_types: ['sftp'] });
    const { client: cb } = await ProtocolClient.connect(app, b.token, { sync: true, relay: true, connector_types: ['s3'] });
    const src = await makeConnection(app, account.apiKey, 'sftp');
    const dst = await makeConnection(app, account.apiKey, 's3');
    const relayed = await makeTransfer(app, account.apiKey, src.id, dst.id, { options: SYNC });
    expectError(await post(account.apiKey, `/transfers/${relayed.id}/plan`), 409, /can only run relayed/);
    ca.close();
    cb.close();
  });

  test('execute {plan_id}: the job carries the plan and pages its items from the control plane, for its own agent only', async () => {
    const ctx = await setup();
    const planId = await readyPlan(ctx);
    const started = await post(ctx.key, `/transfers/${ctx.job.id}/execute?wait=false`, { plan_id: planId });
    expect(started.statusCode).toBe(202);
    const assign = (await ctx.client.next('job.assign')).payload;
    expect(assign).toMatchObject({ job_id: ctx.job.id, plan_id: planId, options: { mode: 'sync' } });
    ctx.client.send('job.accepted', { job_id: ctx.job.id });

    const page = async (client: ProtocolClient, jobId: string, limit: number, after?: string) => {
      const request_id = new Types.ObjectId().toHexString();
      client.send('job.plan.query', { job_id: jobId, request_id, limit, ...(after !== undefined ? { after } : {}) });
      return eventually(async () => client.all('job.plan.page').find((m) => m.payload.request_id === request_id)?.payload, 'a page');
    };
    const p1 = await page(ctx.client, ctx.job.id, 2);
    expect(p1).toMatchObject({ items: [item('a.txt', 'copy'), item('b/c.txt', 'update')], done: false });
    const p2 = await page(ctx.client, ctx.job.id, 2, 'b/c.txt');
    expect(p2.items.map((i) => i.path)).toEqual(['b/d.txt', 'old.txt']);
    expect(p2.done).toBe(false);
    // After a path it was not just given (a reconnected agent), and the end.
    const p3 = await page(ctx.client, ctx.job.id, 10, 'b/d.txt');
    expect(p3).toEqual({ request_id: p3.request_id, items: [item('old.txt', 'delete'), item('z.txt', 'copy')], done: true });

    // Another account's agent asking for this job, and this agent asking for a job it does not run: nothing.
    const stranger = await setup();
    const foreign = await page(stranger.client, ctx.job.id, 10);
    expect(foreign).toMatchObject({ items: [], done: true });
    const notRunning = await page(ctx.client, stranger.job.id, 10);
    expect(notRunning).toMatchObject({ items: [], done: true });

    ctx.client.send('job.completed', { job_id: ctx.job.id, ...counters(5, 4, 40), files_deleted: 1 });
    await eventually(async () => (await getTransfer(app, ctx.key, ctx.job.id)).status === 'completed', 'completed');
    // Once the run is over, its plan is not paged any more.
    expect(await page(ctx.client, ctx.job.id, 10)).toMatchObject({ items: [], done: true });
    const transfer = await getTransfer(app, ctx.key, ctx.job.id);
    expect(transfer.files_deleted).toBe(1);
    const audit = await app.db.auditEvents.findOne({ action: 'transfer.execute', 'resource.id': ctx.job.id }).lean();
    expect(audit?.details).toMatchObject({ plan_id: planId });
  });

  test('execute {plan_id} refuses a plan that is not this transfer\'s, expired, still planning, or of a transfer changed since', async () => {
    const ctx = await setup();
    const planId = await readyPlan(ctx);
    const other = await makeTransfer(app, ctx.key, ctx.src.id, ctx.dst.id, { options: SYNC });
    expectError(await post(ctx.key, `/transfers/${other.id}/execute`, { plan_id: planId }), 409, `Plan ${planId} is a plan of transfer ${ctx.job.id}, not of transfer ${other.id}`);

    const stranger = await setup();
    const strangerPlan = await readyPlan(stranger);
    expectError(await post(ctx.key, `/transfers/${ctx.job.id}/execute`, { plan_id: strangerPlan }), 404, `Plan ${strangerPlan} not found`);
    expectError(await post(ctx.key, `/transfers/${ctx.job.id}/execute`, { plan_id: 'nope' }), 404, 'Plan nope not found');

    const planOid = new Types.ObjectId(planId);
    await app.db.transferPlans.updateOne({ _id: planOid }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    expectError(await post(ctx.key, `/transfers/${ctx.job.id}/execute`, { plan_id: planId }), 410, /^Plan .* expired at .*; create a new one/);
    await app.db.transferPlans.updateOne({ _id: planOid }, { $set: { expires_at: new Date(Date.now() + 60_000), status: 'planning' } });
    expectError(await post(ctx.key, `/transfers/${ctx.job.id}/execute`, { plan_id: planId }), 409, /is still being computed/);
    await app.db.transferPlans.updateOne({ _id: planOid }, { $set: { status: 'ready' } });

    // A rotated credential changes nothing the plan saw; the destination's path does.
    await app.db.connections.updateOne({ _id: new Types.ObjectId(ctx.dst.id) }, { $set: { updated_at: new Date() }, $inc: { revision: 1 } });
    const stored = await app.transfers.find(ctx.account.accountId, ctx.job.id);
    expect(String((await app.plans.executable(ctx.account.accountId, stored, planId))._id)).toBe(planId);
    const moved = await app.inject({ method: 'PUT', url: `/api/v1/connections/${ctx.dst.id}`, headers: auth(ctx.key), payload: { path: '/elsewhere' } });
    expect(moved.statusCode).toBe(200);
    expectError(await post(ctx.key, `/transfers/${ctx.job.id}/execute`, { plan_id: planId }), 409, /changed since plan .* was made/);
    expect((await getTransfer(app, ctx.key, ctx.job.id)).queued_at).toBeNull();
    expect(ctx.client.all('job.assign')).toEqual([]);
  });

  test('the plans of a deleted transfer go with it', async () => {
    const ctx = await setup();
    const planId = await readyPlan(ctx);
    await post(ctx.key, `/transfers/${ctx.job.id}/cancel`);
    expect((await app.inject({ method: 'DELETE', url: `/api/v1/transfers/${ctx.job.id}`, headers: auth(ctx.key) })).statusCode).toBe(200);
    expect(await app.db.transferPlans.countDocuments({ _id: new Types.ObjectId(planId) })).toBe(0);
    expect(await app.db.transferPlanBatches.countDocuments({ plan_id: new Types.ObjectId(planId) })).toBe(0);
  });

  test('planning needs transfers:write, reading a plan transfers:read', async () => {
    const ctx = await setup();
    const planId = await readyPlan(ctx);
    const reader = await createKey(app, ctx.key, ['transfers:read']);
    expect((await get(reader, `/transfers/${ctx.job.id}/plan`)).json().data.id).toBe(planId);
    expect((await get(reader, `/transfers/${ctx.job.id}/plan/items`)).statusCode).toBe(200);
    expect((await post(reader, `/transfers/${ctx.job.id}/plan`)).statusCode).toBe(403);
    expect((await post(reader, `/transfers/${ctx.job.id}/execute`, { plan_id: planId })).statusCode).toBe(403);
  });
});

import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, expectError } from './helper.js';
import { counters, makeAgent, makeConnection, sha } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/**
 * Workflows on the control plane (issue 15): the API and its checks, and the run engine driven by
 * a fake agent (ProtocolClient) that runs the transfer steps' jobs and answers `source.settle`:
 * which files it is asked to move (only verified ones), what a failing transfer leaves alone,
 * on_failure, cancel, run parameters, the notify event, and a run whose transfer ended elsewhere
 * going on through the sweep. Real agents and servers: e2e/test/workflows.e2e.test.ts.
 */
let app: App;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200 });
  await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => app.close());

type Body = Record<string, unknown>;
const call = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', key: string, url: string, payload?: Body) =>
  app.inject({ method, url: `/api/v1${url}`, headers: auth(key), ...(payload !== undefined ? { payload } : {}) });

async function setup(options: { agent?: boolean } = {}) {
  const account = await createAccount(app);
  const key = account.apiKey;
  const src = await makeConnection(app, key, 'sftp');
  const dst = await makeConnection(app, key, 's3');
  const transfer = (over: Body = {}): Body => ({ type: 'transfer', sourceConnectionId: src.id, sourcePath: '/inbox', destinationConnectionId: dst.id, destinationPath: '/archive', ...over });
  let client: ProtocolClient | null = null;
  if (options.agent) {
    const agent = await makeAgent(app, key);
    client = (await ProtocolClient.connect(app, agent.token, { settle: true })).client;
  }
  const create = async (steps: Body[], over: Body = {}) => {
    const res = await call('POST', key, '/workflows', { name: `wf ${new Types.ObjectId()}`, steps, ...over });
    if (res.statusCode !== 201) throw new Error(`create workflow: ${res.statusCode} ${res.body}`);
    return res.json().data as { id: string };
  };
  const run = async (id: string, body: Body = {}) => {
    const res = await call('POST', key, `/workflows/${id}/run`, body);
    if (res.statusCode !== 201) throw new Error(`run workflow: ${res.statusCode} ${res.body}`);
    return res.json().data as { id: string; status: string; steps: Array<{ status: string; transfer_id: string | null }> };
  };
  const getRun = async (id: string) => (await call('GET', key, `/workflow-runs/${id}`)).json().data;
  return { account, key, src, dst, transfer, client, create, run, getRun };
}

const copied = (path: string, n: number) => ({ path, status: 'copied' as const, size: 100 + n, sha256: sha(n), verified_by: 'sha256' });

describe('the API', () => {
  test('create, get, list, update, delete; defaults; the audit trail', async () => {
    const s = await setup();
    const res = await call('POST', s.key, '/workflows', { name: 'inbox to archive', steps: [s.transfer(), { type: 'move_source', to: '/done/{{date:YYYY-MM-DD}}' }, { type: 'notify', channel: 'webhook_event', subject: 'moved' }] });
    expect(res.statusCode).toBe(201);
    const w = res.json().data;
    expect(w).toMatchObject({
      name: 'inbox to archive', on_failure: 'stop',
      steps: [
        { type: 'transfer', sourceConnectionId: s.src.id, sourcePath: '/inbox', destinationConnectionId: s.dst.id, destinationPath: '/archive', options: { overwrite: 'if_changed', verify: 'checksum' } },
        { type: 'move_source', to: '/done/{{date:YYYY-MM-DD}}' },
        { type: 'notify', channel: 'webhook_event', subject: 'moved' },
      ],
    });
    expect((await call('GET', s.key, `/workflows/${w.id}`)).json().data).toEqual(w);
    expect((await call('GET', s.key, '/workflows')).json().data.map((x: { id: string }) => x.id)).toEqual([w.id]);
    const updated = (await call('PUT', s.key, `/workflows/${w.id}`, { on_failure: 'continue', steps: [s.transfer(), { type: 'delete_source' }] })).json().data;
    expect(updated).toMatchObject({ name: 'inbox to archive', on_failure: 'continue', steps: [{ type: 'transfer' }, { type: 'delete_source' }] });
    expect(updated.steps[1]).toEqual({ type: 'delete_source' });
    expect((await call('DELETE', s.key, `/workflows/${w.id}`)).json().data).toEqual({ id: w.id, deleted: true });
    expectError(await call('GET', s.key, `/workflows/${w.id}`), 404, `Workflow ${w.id} not found`);
    const audit = await app.db.auditEvents.find({ 'resource.id': w.id }).lean();
    expect(audit.map((a) => a.action).sort()).toEqual(['workflow.create', 'workflow.delete', 'workflow.update']);
  });

  test('every bad input is a 400 naming the field, and stores nothing', async () => {
    const s = await setup();
    await call('POST', s.key, '/parameters', { name: 'token', value: 'x', secret: true });
    const bad: Array<[Body, RegExp]> = [
      [{ name: 'x', steps: [] }, /steps/],
      [{ name: 'x' }, /steps/],
      [{ name: 'x', steps: [{ type: 'copy' }] }, /steps\.0\.type/],
      [{ name: 'x', steps: [s.transfer({ sourcePath: undefined })] }, /^steps\[0\]\.sourcePath is required for a transfer step$/],
      [{ name: 'x', steps: [s.transfer({ to: '/x' })] }, /^steps\[0\]\.to is not a field of a transfer step$/],
      [{ name: 'x', steps: [s.transfer({ sourceConnectionId: new Types.ObjectId().toHexString() })] }, /^steps\[0\]\.sourceConnectionId: connection [0-9a-f]{24} not found$/],
      [{ name: 'x', steps: [s.transfer({ destinationPath: '/a/{{params.nope}}' })] }, /^steps\[0\]\.destinationPath names the parameter "nope", which does not exist$/],
      [{ name: 'x', steps: [s.transfer({ destinationPath: '/a/{{params.token}}' })] }, /^steps\[0\]\.destinationPath .*secret/],
      [{ name: 'x', steps: [s.transfer({ sourcePath: '/a/{{bogus}}' })] }, /^steps\[0\]\.sourcePath has an unknown variable/],
      [{ name: 'x', steps: [s.transfer({ sourcePath: '/a/../b' })] }, /^steps\[0\]\.sourcePath/],
      [{ name: 'x', steps: [{ type: 'move_source', to: '/done' }] }, /^steps\[0\]: a move_source step needs a transfer step before it/],
      [{ name: 'x', steps: [s.transfer(), { type: 'move_source' }] }, /^steps\[1\]\.to is required for a move_source step$/],
      [{ name: 'x', steps: [s.transfer(), { type: 'delete_source', to: '/x' }] }, /^steps\[1\]\.to is not a field of a delete_source step$/],
      [{ name: 'x', steps: [s.transfer(), { type: 'move_source', to: '/d' }, { type: 'delete_source' }] }, /^steps\[2\]: the source files of steps\[0\] were already moved by steps\[1\]$/],
      [{ name: 'x', steps: [s.transfer(), { type: 'move_source', to: ['a@b.c'] }] }, /^steps\[1\]\.to must be a folder path/],
      [{ name: 'x', steps: [{ type: 'notify' }] }, /^steps\[0\]\.channel is required for a notify step$/],
      [{ name: 'x', steps: [{ type: 'notify', channel: 'email', to: ['ops@example.com'] }] }, /^steps\[0\]\.to: a notify step goes to the account's notification recipients/],
      [{ name: 'x', steps: [{ type: 'notify', channel: 'pager' }] }, /steps\.0\.channel/],
      [{ name: 'x', steps: [s.transfer()], on_failure: 'retry' }, /on_failure/],
    ];
    for (const [body, message] of bad) expectError(await call('POST', s.key, '/workflows', body), 400, message);
    expect(await app.db.workflows.countDocuments({ account_id: s.account.accountId })).toBe(0);
    const w = await s.create([s.transfer()]);
    expectError(await call('PUT', s.key, `/workflows/${w.id}`, {}), 400, /at least one of/);
    expectError(await call('POST', s.key, `/workflows/${w.id}/run`, { params: { unused: 'x' } }), 400, /^params\.unused: no step of this workflow uses \{\{params\.unused\}\}$/);
    expectError(await call('POST', s.key, `/workflows/${w.id}/run`, { params: { 'bad name': 'x' } }), 400, /params/);
    expect(await app.db.workflowRuns.countDocuments({ workflow_id: w.id })).toBe(0);
  });

  test("another account's workflows and runs are 404s, and scopes are enforced", async () => {
    const s = await setup();
    const other = await setup();
    const w = await s.create([{ type: 'notify', channel: 'webhook_event' }]);
    const r = await s.run(w.id);
    for (const [method, url] of [['GET', `/workflows/${w.id}`], ['PUT', `/workflows/${w.id}`], ['DELETE', `/workflows/${w.id}`], ['POST', `/workflows/${w.id}/run`], ['GET', `/workflows/${w.id}/runs`]] as const) {
      expectError(await call(method, other.key, url, method === 'PUT' ? { name: 'x' } : method === 'POST' ? {} : undefined), 404, `Workflow ${w.id} not found`);
    }
    expectError(await call('GET', other.key, `/workflow-runs/${r.id}`), 404, `Workflow run ${r.id} not found`);
    expectError(await call('POST', other.key, `/workflow-runs/${r.id}/cancel`), 404, `Workflow run ${r.id} not found`);
    const reader = await createKey(app, s.key, ['workflows:read']);
    expect((await call('GET', reader, `/workflows/${w.id}`)).statusCode).toBe(200);
    expectError(await call('POST', reader, `/workflows/${w.id}/run`, {}), 403);
    const noTransfers = await createKey(app, s.key, ['workflows:read', 'workflows:write']);
    expectError(await call('POST', noTransfers, `/workflows/${w.id}/run`, {}), 403, /needs transfers:write/);
  });
});

describe('runs', () => {
  test('transfer → move_source → notify: only the verified files are moved, then the event is recorded', async () => {
    const s = await setup({ agent: true });
    const w = await s.create([s.transfer(), { type: 'move_source', to: '/done/{{run.id}}' }, { type: 'notify', channel: 'webhook_event', subject: 'inbox archived' }]);
    const started = await s.run(w.id);
    expect(started).toMatchObject({ status: 'running', trigger: { type: 'manual', id: null }, steps: [{ type: 'transfer', status: 'running' }, { status: 'pending' }, { status: 'pending' }] });
    const transferId = started.steps[0]!.transfer_id!;
    const assign = (await s.client!.next('job.assign')).payload;
    expect(assign).toMatchObject({ job_id: transferId, source_path: '/inbox', destination_path: '/archive' });
    s.client!.send('job.accepted', { job_id: transferId });
    s.client!.send('job.progress', {
      job_id: transferId, ...counters(5, 3, 300, { files_skipped: 2 }), listing_done: true,
      files: [
        copied('a.csv', 1), copied('sub/b.csv', 2),
        { path: 'same.csv', status: 'skipped', size: 7 }, // the destination had it: not verified by this transfer
        { path: 'earlier.csv', status: 'skipped', size: 9, verified_by: 'attempt 1' },
        copied('c.csv', 3),
      ],
    });
    s.client!.send('job.completed', { job_id: transferId, ...counters(5, 3, 300, { files_skipped: 2 }) });
    const settle = (await s.client!.next('source.settle')).payload;
    expect(settle).toMatchObject({ action: 'move', source_path: '/inbox', to: `/done/${started.id}`, connection: { id: s.src.id, type: 'sftp' } });
    expect(settle.files.map((f) => f.path).sort()).toEqual(['a.csv', 'c.csv', 'earlier.csv', 'sub/b.csv']);
    expect(settle.files.find((f) => f.path === 'a.csv')!.size).toBe(101);
    s.client!.send('source.settle.result', {
      request_id: settle.request_id,
      results: [
        { path: 'a.csv', outcome: 'moved' }, { path: 'sub/b.csv', outcome: 'moved' }, { path: 'earlier.csv', outcome: 'gone' }, { path: 'c.csv', outcome: 'changed' },
      ],
    });
    const done = await eventually(async () => {
      const r = await s.getRun(started.id);
      return r.status !== 'running' && r;
    }, 'the run ends');
    expect(done).toMatchObject({
      status: 'completed', error: null,
      steps: [
        { type: 'transfer', status: 'completed', transfer_id: transferId },
        { type: 'move_source', status: 'completed', files: { moved: 2, deleted: 0, gone: 1, changed: 1, unverified: 1, failed: 0 } },
        { type: 'notify', status: 'completed' },
      ],
    });
    // The run shows `completed` a moment before its `workflow.completed` event is written: wait for both events.
    const events = await eventually(async () => {
      const found = await app.db.outboxEvents.find({ account_id: s.account.accountId, type: { $in: ['workflow.notify', 'workflow.completed'] } }).sort({ _id: 1 }).lean();
      return found.length >= 2 && found;
    }, 'the run\'s notify and completed events');
    expect(events.map((e) => e.type)).toEqual(['workflow.notify', 'workflow.completed']);
    expect(events[0]!.data).toMatchObject({ run_id: started.id, workflow_id: w.id, subject: 'inbox archived', steps: [{ status: 'completed' }, { status: 'completed', files: { moved: 2 } }, { status: 'running' }] });
    expect((await call('GET', s.key, `/workflows/${w.id}/runs`)).json().data.map((r: { id: string }) => r.id)).toEqual([started.id]);
    expect((await call('GET', s.key, `/workflows/${w.id}/runs?status=failed`)).json().data).toEqual([]);
  });

  test('a failing transfer step leaves the source untouched: no settle request, later steps skipped', async () => {
    const s = await setup({ agent: true });
    const w = await s.create([s.transfer(), { type: 'delete_source' }, { type: 'notify', channel: 'webhook_event' }]);
    const started = await s.run(w.id);
    const transferId = started.steps[0]!.transfer_id!;
    await s.client!.next('job.assign');
    s.client!.send('job.accepted', { job_id: transferId });
    s.client!.send('job.progress', { job_id: transferId, ...counters(2, 1, 100, { files_failed: 1 }), listing_done: true, files: [copied('a.csv', 1), { path: 'b.csv', status: 'failed', size: 0, error: 'permission denied' }] });
    s.client!.send('job.failed', { job_id: transferId, ...counters(2, 1, 100, { files_failed: 1 }), error: '1 file failed: b.csv (permission denied)' });
    const done = await eventually(async () => {
      const r = await s.getRun(started.id);
      return r.status !== 'running' && r;
    }, 'the run ends');
    expect(done).toMatchObject({
      status: 'failed', error: expect.stringMatching(/^steps\[0\] \(transfer\): its transfer [0-9a-f]{24} failed: 1 file failed/),
      steps: [{ status: 'failed' }, { status: 'skipped', started_at: null }, { status: 'skipped' }],
    });
    expect(s.client!.all('source.settle')).toEqual([]);
    expect(await app.db.outboxEvents.countDocuments({ account_id: s.account.accountId, type: 'workflow.notify' })).toBe(0);
    // The run shows `failed` a moment before its `workflow.failed` event is written.
    await eventually(async () => (await app.db.outboxEvents.countDocuments({ account_id: s.account.accountId, type: 'workflow.failed' })) === 1, 'the workflow.failed event');
  });

  test('on_failure continue runs the later steps, and the run still ends failed', async () => {
    const s = await setup({ agent: true });
    const w = await s.create([s.transfer(), { type: 'notify', channel: 'webhook_event' }], { on_failure: 'continue' });
    const started = await s.run(w.id);
    const transferId = started.steps[0]!.transfer_id!;
    await s.client!.next('job.assign');
    s.client!.send('job.accepted', { job_id: transferId });
    s.client!.send('job.failed', { job_id: transferId, ...counters(0, 0, 0), error: 'source path /inbox does not exist' });
    const done = await eventually(async () => {
      const r = await s.getRun(started.id);
      return r.status !== 'running' && r;
    }, 'the run ends');
    expect(done).toMatchObject({ status: 'failed', steps: [{ status: 'failed' }, { status: 'completed' }] });
    expect(await app.db.outboxEvents.countDocuments({ account_id: s.account.accountId, type: 'workflow.notify' })).toBe(1);
  });

  test('a settle the agent refuses fails the step naming the file', async () => {
    const s = await setup({ agent: true });
    const w = await s.create([s.transfer(), { type: 'delete_source' }]);
    const started = await s.run(w.id);
    const transferId = started.steps[0]!.transfer_id!;
    await s.client!.next('job.assign');
    s.client!.send('job.accepted', { job_id: transferId });
    s.client!.send('job.progress', { job_id: transferId, ...counters(2, 2, 200), listing_done: true, files: [copied('a.csv', 1), copied('b.csv', 2)] });
    s.client!.send('job.completed', { job_id: transferId, ...counters(2, 2, 200) });
    const settle = (await s.client!.next('source.settle')).payload;
    expect(settle).toMatchObject({ action: 'delete', source_path: '/inbox' });
    expect(settle.to).toBeUndefined();
    s.client!.send('source.settle.result', { request_id: settle.request_id, results: [{ path: 'a.csv', outcome: 'deleted' }, { path: 'b.csv', outcome: 'failed', error: 'permission denied' }] });
    const done = await eventually(async () => {
      const r = await s.getRun(started.id);
      return r.status !== 'running' && r;
    }, 'the run ends');
    expect(done).toMatchObject({ status: 'failed', steps: [{ status: 'completed' }, { status: 'failed', files: { deleted: 1, failed: 1 }, error: '1 file could not be deleted (first: b.csv: permission denied)' }] });
  });

  test('cancel: the running transfer is cancelled, the later steps skipped; a second cancel is a 409', async () => {
    const s = await setup({ agent: true });
    const w = await s.create([s.transfer(), { type: 'notify', channel: 'webhook_event' }]);
    const started = await s.run(w.id);
    await s.client!.next('job.assign');
    const res = await call('POST', s.key, `/workflow-runs/${started.id}/cancel`);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ status: 'cancelled', error: 'the run was cancelled', steps: [{ status: 'cancelled' }, { status: 'skipped' }] });
    expect((await app.db.transfers.findById(started.steps[0]!.transfer_id).lean())!.status).toBe('cancelled');
    expectError(await call('POST', s.key, `/workflow-runs/${started.id}/cancel`), 409, /has ended \(cancelled\)/);
    expectError(await call('DELETE', s.key, '/workflows/' + new Types.ObjectId().toHexString()), 404);
  });

  test('run parameters stand in for the account\'s; a transfer ended on another instance is found by the sweep', async () => {
    const s = await setup({ agent: true });
    await call('POST', s.key, '/parameters', { name: 'region', value: 'eu' });
    const w = await s.create([s.transfer({ sourcePath: '/in/{{params.region}}', destinationPath: '/out/{{params.region}}/{{run.id}}' })]);
    const started = await s.run(w.id, { params: { region: 'us' } });
    expect(started).toMatchObject({ params: ['region'] });
    const transferId = started.steps[0]!.transfer_id!;
    const job = await app.db.transfers.findById(transferId).lean();
    expect(job).toMatchObject({ source_path: '/in/us', destination_path: `/out/us/${started.id}` });
    // The run's parameter values are never shown.
    expect(JSON.stringify(await s.getRun(started.id))).not.toContain('"us"');
    // The transfer ends behind this instance's back (as on another instance): the sweep moves the run on.
    await app.db.transfers.updateOne({ _id: transferId }, { $set: { status: 'completed', completed_at: new Date() } });
    expect((await s.getRun(started.id)).status).toBe('running');
    // The dispatcher may still write the queued transfer (FerretDB writes whole documents back) and
    // the app's own loop may hold the sweep: end it again until the sweep has seen it ended.
    const ended = await eventually(async () => {
      await app.db.transfers.updateOne({ _id: transferId, status: { $ne: 'completed' } }, { $set: { status: 'completed', completed_at: new Date() } });
      await app.workflowRuns.sweep();
      const r = await s.getRun(started.id);
      return r.status !== 'running' && r;
    }, 'the sweep moved the run on');
    expect(ended).toMatchObject({ status: 'completed', steps: [{ status: 'completed' }] });
  });

  test('a run parameter holding {{…}} lands verbatim in the path: a value is inserted as text, never rendered again (docs/security.md "Templates: data is never code")', async () => {
    const s = await setup({ agent: true });
    await call('POST', s.key, '/parameters', { name: 'region', value: 'eu' });
    await call('POST', s.key, '/parameters', { name: 'elsewhere', value: 'payroll' });
    const w = await s.create([s.transfer({ sourcePath: '/in/{{params.region}}', destinationPath: '/out/{{params.region}}' })]);
    const started = await s.run(w.id, { params: { region: '{{params.elsewhere}}-{{run.id}}' } });
    const job = await app.db.transfers.findById(started.steps[0]!.transfer_id!).lean();
    expect(job).toMatchObject({ source_path: '/in/{{params.elsewhere}}-{{run.id}}', destination_path: '/out/{{params.elsewhere}}-{{run.id}}' });
    await call('POST', s.key, `/workflow-runs/${started.id}/cancel`);
  });

  test('a notify step\'s subject is one header line, whatever it holds', async () => {
    const s = await setup();
    await app.db.notificationSettings.collection.insertOne({
      account_id: new Types.ObjectId(s.account.accountId), enabled: true, recipients: ['ops@example.test'], from: 'xfer@example.test', events: [], digest: 'none',
      smtp_host: 'smtp.example.test', smtp_port: 587, smtp_secure: false, smtp_username: null, smtp_password: null, created_at: new Date(), updated_at: new Date(),
    });
    const w = await s.create([{ type: 'notify', channel: 'email', subject: 'done\r\nBcc: victim@example.test\u0000\u2028x' }]);
    expect(await s.run(w.id)).toMatchObject({ status: 'completed' });
    const queued = await app.db.notificationDeliveries.find({ account_id: s.account.accountId, event: 'workflow.notify' }).lean();
    expect(queued).toHaveLength(1);
    expect(queued[0]!.subject).toBe('[xfer] done Bcc: victim@example.test x');
  });

  test("notify by email queues one email for the account's recipients; with email off the step fails saying so", async () => {
    const s = await setup();
    const w = await s.create([{ type: 'notify', channel: 'email', subject: 'nightly done' }]);
    const off = await s.run(w.id);
    expect(off).toMatchObject({ status: 'failed', steps: [{ status: 'failed', error: expect.stringMatching(/^email notifications are off for this account/) }] });
    await app.db.notificationSettings.collection.insertOne({
      account_id: new Types.ObjectId(s.account.accountId), enabled: true, recipients: ['ops@example.test'], from: 'xfer@example.test', events: [], digest: 'none',
      smtp_host: 'smtp.example.test', smtp_port: 587, smtp_secure: false, smtp_username: null, smtp_password: null, created_at: new Date(), updated_at: new Date(),
    });
    const on = await s.run(w.id);
    expect(on).toMatchObject({ status: 'completed', steps: [{ status: 'completed' }] });
    const queued = await app.db.notificationDeliveries.find({ account_id: s.account.accountId, event: 'workflow.notify' }).lean();
    expect(queued).toHaveLength(1);
    expect(queued[0]).toMatchObject({ subject: '[xfer] nightly done', recipients: ['ops@example.test'] });
    expect(queued[0]!.text).toContain(on.id);
  });

  test('a workflow named by a run under way cannot be deleted; a run without a file fails a {{file.*}} step saying so', async () => {
    const s = await setup({ agent: true });
    const w = await s.create([s.transfer({ sourcePath: '/inbox/{{file.name}}' })]);
    const r = await s.run(w.id);
    expect(r).toMatchObject({ status: 'failed', steps: [{ status: 'failed', error: "steps[0].sourcePath uses {{file.name}} or {{file.path}}, which only a run started by a watcher has (this run was started by hand)" }] });
    const w2 = await s.create([s.transfer()]);
    const r2 = await s.run(w2.id);
    expectError(await call('DELETE', s.key, `/workflows/${w2.id}`), 409, new RegExp(`has a run under way \\(${r2.id}\\)`));
    await call('POST', s.key, `/workflow-runs/${r2.id}/cancel`);
    expect((await call('DELETE', s.key, `/workflows/${w2.id}`)).statusCode).toBe(200);
    expect(await app.db.workflowRuns.countDocuments({ workflow_id: w2.id })).toBe(0);
  });
});

describe('triggers', () => {
  test('a schedule of a workflow starts a run (once per schedule run); its runs show the workflow run; the workflow cannot be deleted under it', async () => {
    const s = await setup({ agent: true });
    const w = await s.create([s.transfer({ destinationPath: '/nightly/{{date:YYYY-MM-DD}}' })]);
    const created = await call('POST', s.key, '/schedules', { name: 'nightly', cron: '0 2 * * *', timezone: 'Europe/Berlin', workflowId: w.id });
    expect(created.statusCode).toBe(201);
    const schedule = created.json().data;
    expect(schedule).toMatchObject({ transfer: null, workflowId: w.id });
    const ran = await call('POST', s.key, `/schedules/${schedule.id}/run`);
    expect(ran.statusCode).toBe(201);
    const scheduleRun = ran.json().data;
    expect(scheduleRun).toMatchObject({ transfer_id: null, workflow_run_id: scheduleRun.id, status: 'in-progress', error: null });
    const run = await s.getRun(scheduleRun.workflow_run_id);
    expect(run).toMatchObject({ workflow_id: w.id, status: 'running', trigger: { type: 'schedule', id: schedule.id } });
    expect((await call('GET', s.key, `/schedules/${schedule.id}`)).json().data).toMatchObject({ last_status: 'in-progress' });
    expectError(await call('DELETE', s.key, `/workflows/${w.id}`), 409, new RegExp(`is run by schedule 'nightly' \\(${schedule.id}\\)`));
    // The same schedule run started again (an instance that died after the claim) starts no second workflow run.
    const stored = await app.db.schedules.findById(schedule.id).lean();
    const storedRun = await app.db.scheduleRuns.findById(scheduleRun.id).lean();
    await app.workflowRuns.startOf(stored!.account_id, stored!.workflow_id!, { id: storedRun!._id, trigger: { type: 'schedule', id: stored!._id } });
    expect(await app.db.workflowRuns.countDocuments({ workflow_id: w.id })).toBe(1);
    expect(await app.db.transfers.countDocuments({ account_id: s.account.accountId })).toBe(1);
    // A schedule can be moved from its workflow to a transfer and back.
    const moved = await call('PUT', s.key, `/schedules/${schedule.id}`, { transfer: { sourceConnectionId: s.src.id, sourcePath: '/a', destinationConnectionId: s.dst.id, destinationPath: '/b' } });
    expect(moved.json().data).toMatchObject({ workflowId: null, transfer: { sourcePath: '/a' } });
    expect((await call('PUT', s.key, `/schedules/${schedule.id}`, { workflowId: w.id })).json().data).toMatchObject({ workflowId: w.id, transfer: null });
  });

  /**
   * The run a pending watcher event started, once its first step's transfer exists. The app's own
   * watcher loop may sweep the event at the same moment as the test (then this sweep finds it
   * taken and returns at once), and the step stores its transfer's id before it creates the
   * transfer: both are waited for.
   */
  const sweptWithTransfer = (s: { getRun(id: string): Promise<any> }, eventId: Types.ObjectId) => eventually(async () => {
    await app.watcherEvents.sweepPending();
    const started = await s.getRun(String(eventId));
    return started?.steps[0]?.transfer_id && (await app.db.transfers.exists({ _id: started.steps[0].transfer_id })) && started;
  }, 'the sweep started the event and its transfer');

  test("a watcher's new file starts a run with the file as {{file.*}}, once however often the event is started", async () => {
    const s = await setup({ agent: true });
    const w = await s.create([s.transfer({ sourcePath: '/{{file.path}}', destinationPath: '/archive/{{file.name}}' }), { type: 'move_source', to: '/done' }]);
    const res = await call('POST', s.key, '/watchers', { name: 'inbox', connectionId: s.src.id, path: '/inbox', poll_interval_seconds: 10, action: { workflowId: w.id } });
    expect(res.statusCode).toBe(201);
    const watcher = res.json().data;
    expect(watcher.action).toEqual({ transfer: null, workflowId: w.id });
    expectError(await call('POST', s.key, '/watchers', { name: 'x', connectionId: s.src.id, path: '/inbox', action: { workflowId: new Types.ObjectId().toHexString() } }), 400, /^action\.workflowId: workflow [0-9a-f]{24} not found$/);
    // An event an instance left pending (it stopped before starting the action): the sweep starts it.
    const eventId = new Types.ObjectId();
    const seen = new Date(Date.now() - 120_000);
    await app.db.watcherEvents.collection.insertOne({
      _id: eventId, watcher_id: new Types.ObjectId(watcher.id), account_id: new Types.ObjectId(s.account.accountId), path: 'inbox/report.csv',
      version: 'size:5:mtime:1', size: 5, modified_at: null, agent_id: null, seen_at: seen, state: 'pending', transfer_id: null, workflow_run_id: null, error: null,
    });
    // The app's own watcher loop may sweep it at the same moment: wait for the run, whichever started it.
    const run = await sweptWithTransfer(s, eventId);
    expect(run).toMatchObject({ status: 'running', trigger: { type: 'watcher', id: watcher.id }, file: { name: 'report.csv', path: 'inbox/report.csv' } });
    const job = await app.db.transfers.findById(run.steps[0].transfer_id).lean();
    expect(job).toMatchObject({ source_path: '/inbox/report.csv', destination_path: '/archive/report.csv' });
    // Started again: the same run, the same transfer.
    const watcherDoc = await app.db.watchers.findById(watcher.id).lean();
    const eventDoc = await app.db.watcherEvents.findById(eventId).lean();
    await app.watcherEvents.start(watcherDoc as never, { ...eventDoc!, state: 'pending' } as never);
    expect(await app.db.workflowRuns.countDocuments({ workflow_id: w.id })).toBe(1);
    expect(await app.db.transfers.countDocuments({ account_id: s.account.accountId })).toBe(1);
    const events = (await call('GET', s.key, `/watchers/${watcher.id}/events`)).json().data;
    expect(events).toEqual([expect.objectContaining({ id: String(eventId), workflow_run_id: String(eventId), transfer_id: null, action_status: 'in-progress' })]);
    expectError(await call('DELETE', s.key, `/workflows/${w.id}`), 409, /is run by watcher 'inbox'/);
  });

  test("a watcher's file named {{params.X}}.csv runs the workflow with that very name as {{file.*}}: never rendered again", async () => {
    const s = await setup({ agent: true });
    await call('POST', s.key, '/parameters', { name: 'X', value: 'payroll/salaries' });
    const w = await s.create([s.transfer({ sourcePath: '/{{file.path}}', destinationPath: '/archive/{{file.name}}' }), { type: 'move_source', to: '/done/{{file.name}}' }]);
    const watcher = (await call('POST', s.key, '/watchers', { name: 'inbox', connectionId: s.src.id, path: '/inbox', poll_interval_seconds: 10, action: { workflowId: w.id } })).json().data;
    const eventId = new Types.ObjectId();
    await app.db.watcherEvents.collection.insertOne({
      _id: eventId, watcher_id: new Types.ObjectId(watcher.id), account_id: new Types.ObjectId(s.account.accountId), path: 'inbox/{{params.X}}.csv',
      version: 'size:5:mtime:1', size: 5, modified_at: null, agent_id: null, seen_at: new Date(Date.now() - 120_000), state: 'pending', transfer_id: null, workflow_run_id: null, error: null,
    });
    const run = await sweptWithTransfer(s, eventId);
    expect(run).toMatchObject({ file: { name: '{{params.X}}.csv', path: 'inbox/{{params.X}}.csv' } });
    const job = await app.db.transfers.findById(run.steps[0].transfer_id).lean();
    expect(job).toMatchObject({ source_path: '/inbox/{{params.X}}.csv', destination_path: '/archive/{{params.X}}.csv' });
    await call('POST', s.key, `/workflow-runs/${run.id}/cancel`);
  });
});

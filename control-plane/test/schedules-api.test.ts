import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, expectError, type TestAccount } from './helper.js';
import { getTransfer, makeConnection, uniqueName } from './fixtures.js';

let app: App;
let owner: TestAccount;
let other: TestAccount;
let src: string;
let dst: string;

beforeAll(async () => {
  app = await buildTestApp();
  owner = await createAccount(app);
  other = await createAccount(app);
  src = (await makeConnection(app, owner.apiKey, 'sftp')).id;
  dst = (await makeConnection(app, owner.apiKey, 's3')).id;
  for (const [name, value, secret] of [['region', 'eu', false], ['token', 'hush-hush', true]] as const) {
    const res = await app.inject({ method: 'POST', url: '/api/v1/parameters', headers: auth(owner.apiKey), payload: { name, value, secret } });
    if (res.statusCode !== 201) throw new Error(`parameter: ${res.statusCode} ${res.body}`);
  }
});
afterAll(() => app.close());

type Json = Record<string, unknown>;
const call = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, token = owner.apiKey, payload?: Json) =>
  app.inject({ method, url: `/api/v1/schedules${path}`, headers: auth(token), ...(payload ? { payload } : {}) });
const transferBody = (extra: Json = {}) => ({ sourceConnectionId: src, sourcePath: '/in', destinationConnectionId: dst, destinationPath: '/out', ...extra });
const body = (extra: Json = {}) => ({ name: uniqueName('nightly'), cron: '0 2 * * *', transfer: transferBody(), ...extra });

async function created(payload: Json = body(), token = owner.apiKey) {
  const res = await call('POST', '', token, payload);
  if (res.statusCode !== 201) throw new Error(`create schedule: ${res.statusCode} ${res.body}`);
  return res.json().data as Json & { id: string; next_run_at: string | null };
}
const auditOf = (id: string) => app.dbConnection.collection('audit_events').find({ 'resource.id': id }).sort({ _id: 1 }).toArray();
const runsOf = async (id: string) => {
  const res = await call('GET', `/${id}/runs`);
  expect(res.statusCode).toBe(200);
  return res.json().data as Array<Json & { id: string; status: string; transfer_id: string | null }>;
};

describe('POST /schedules', () => {
  test('creates a schedule in a time zone: 201, every answer field, next_run_at the next 02:00 in Berlin, audited', async () => {
    const before = Date.now();
    const s = await created(body({ timezone: 'Europe/Berlin', overlap: 'queue', transfer: transferBody({ sourcePath: '/in/{{params.region}}', options: { verify: 'size' } }) }));
    expect(Object.keys(s).sort()).toEqual([
      'active', 'created_at', 'cron', 'id', 'last_run_at', 'last_status', 'name', 'next_run_at', 'overlap', 'owner', 'timezone', 'transfer', 'updated_at', 'workflowId',
    ]);
    expect(s).toMatchObject({
      cron: '0 2 * * *', timezone: 'Europe/Berlin', active: true, overlap: 'queue', workflowId: null, last_run_at: null, last_status: null,
      transfer: { sourceConnectionId: src, sourcePath: '/in/{{params.region}}', destinationConnectionId: dst, destinationPath: '/out', options: { overwrite: 'if_changed', verify: 'size', concurrency: 8 } },
    });
    const next = new Date(s.next_run_at!);
    expect(next.getTime()).toBeGreaterThan(before);
    expect(next.getTime() - before).toBeLessThanOrEqual(24 * 3600_000);
    expect(new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(next)).toBe('02:00');
    const audit = await auditOf(s.id);
    expect(audit.map((a) => a.action)).toEqual(['schedule.create']);
    expect(audit[0]!.details).toMatchObject({ cron: '0 2 * * *', timezone: 'Europe/Berlin', source_path: '/in/{{params.region}}', source_connection_id: src });
  });

  test('defaults: UTC, active, overlap skip', async () => {
    const s = await created();
    expect(s).toMatchObject({ timezone: 'UTC', active: true, overlap: 'skip' });
    expect(new Date(s.next_run_at!).getUTCHours()).toBe(2);
  });

  test('an inactive schedule has no next_run_at', async () => {
    expect((await created(body({ active: false }))).next_run_at).toBeNull();
  });

  test.each([
    ['a bad cron', () => ({ cron: '61 * * * *' }), /^cron is not valid: /],
    ['a 6-field cron', () => ({ cron: '0 * * * * *' }), /^cron must have exactly 5 fields .*not 6; seconds and years are not supported$/],
    ['a 7-field cron', () => ({ cron: '0 0 0 1 1 * 2030' }), /^cron must have exactly 5 fields .*not 7/],
    ['a cron that never fires', () => ({ cron: '0 0 31 2 *' }), /^cron never matches a time/],
    ['an unknown time zone', () => ({ timezone: 'Europe/Atlantis' }), 'timezone "Europe/Atlantis" is not a known IANA time zone (e.g. Europe/Berlin, UTC)'],
    ['both transfer and workflowId', () => ({ workflowId: new Types.ObjectId().toHexString() }), 'body must have exactly one of transfer and workflowId, not both'],
    ['neither transfer nor workflowId', () => ({ transfer: undefined }), 'body must have exactly one of transfer and workflowId'],
    ['an unknown workflowId', () => ({ transfer: undefined, workflowId: new Types.ObjectId().toHexString() }), /^workflowId: workflow [0-9a-f]{24} not found$/],
    ['a malformed workflowId', () => ({ transfer: undefined, workflowId: 'nope' }), 'workflowId: workflow nope not found'],
    ['an unknown source connection', () => ({ transfer: transferBody({ sourceConnectionId: new Types.ObjectId().toHexString() }) }), /^transfer\.sourceConnectionId: connection [0-9a-f]{24} not found$/],
    ['a malformed destination connection', () => ({ transfer: transferBody({ destinationConnectionId: 'nope' }) }), 'transfer.destinationConnectionId: connection nope not found'],
    ['a relative path', () => ({ transfer: transferBody({ destinationPath: 'out' }) }), "transfer.destinationPath must start with '/'"],
    ['an unknown parameter', () => ({ transfer: transferBody({ sourcePath: '/in/{{params.nope}}' }) }), /^transfer\.sourcePath names the parameter "nope", which does not exist/],
    ['a secret parameter in a path', () => ({ transfer: transferBody({ destinationPath: '/out/{{params.token}}' }) }), /^transfer\.destinationPath .*secret/],
    ['{{file.name}} (only watchers have files)', () => ({ transfer: transferBody({ sourcePath: '/in/{{file.name}}' }) }), /^transfer\.sourcePath uses \{\{file\.name\}\}/],
    ['a bad template', () => ({ transfer: transferBody({ sourcePath: '/in/{{params.region' }) }), /^transfer\.sourcePath has "\{\{" without "\}\}"/],
    ['a bad overlap', () => ({ overlap: 'sometimes' }), /overlap/],
    ['an unknown field', () => ({ colour: 'blue' }), /colour|additional/],
  ] as Array<[string, () => Json, string | RegExp]>)('%s is a 400 naming the field', async (_what, extra, message) => {
    const count = await app.db.schedules.countDocuments({ account_id: owner.accountId });
    expectError(await call('POST', '', owner.apiKey, body(extra())), 400, message);
    expect(await app.db.schedules.countDocuments({ account_id: owner.accountId })).toBe(count);
  });

  test("another account's connection is as unknown as a made-up one", async () => {
    const theirs = await makeConnection(app, other.apiKey, 'sftp');
    expectError(await call('POST', '', owner.apiKey, body({ transfer: transferBody({ sourceConnectionId: theirs.id }) })), 400, `transfer.sourceConnectionId: connection ${theirs.id} not found`);
  });

  test('scopes: schedules:read may read but not write; no schedules scope may not read', async () => {
    const s = await created();
    const reader = await createKey(app, owner.apiKey, ['schedules:read']);
    expect((await call('GET', `/${s.id}`, reader)).statusCode).toBe(200);
    expect((await call('POST', '', reader, body())).statusCode).toBe(403);
    expect((await call('POST', `/${s.id}/run`, reader)).statusCode).toBe(403);
    const none = await createKey(app, owner.apiKey, ['transfers:read']);
    expect((await call('GET', '', none)).statusCode).toBe(403);
    expect((await call('GET', `/${s.id}/runs`, none)).statusCode).toBe(403);
  });

  test('schedules:write without transfers:write may not create, change or run a schedule (it would run transfers): 403, audited as denied; delete needs no more', async () => {
    const s = await created();
    const narrow = await createKey(app, owner.apiKey, ['schedules:read', 'schedules:write']);
    const message = 'A schedule runs transfers: this needs transfers:write, which the calling key does not hold';
    expectError(await call('POST', '', narrow, body()), 403, message);
    expectError(await call('PUT', `/${s.id}`, narrow, { active: true }), 403, message);
    expectError(await call('POST', `/${s.id}/run`, narrow), 403, message);
    expect(await runsOf(s.id)).toEqual([]);
    const denied = (await auditOf(s.id)).filter((a) => a.outcome === 'denied');
    expect(denied.map((a) => [a.action, (a.details as Json).reason])).toEqual([['schedule.update', 'scope escalation'], ['schedule.run', 'scope escalation']]);
    expect((await call('DELETE', `/${s.id}`, narrow)).statusCode).toBe(200);
  });
});

describe('GET, PUT, DELETE /schedules/:id', () => {
  test("other accounts' ids, unknown and malformed ids are all 404 on every route", async () => {
    const s = await created();
    for (const id of [s.id, new Types.ObjectId().toHexString(), 'not-an-id']) {
      const token = id === s.id ? other.apiKey : owner.apiKey;
      expectError(await call('GET', `/${id}`, token), 404, `Schedule ${id} not found`);
      expectError(await call('PUT', `/${id}`, token, { name: 'x' }), 404, `Schedule ${id} not found`);
      expectError(await call('POST', `/${id}/run`, token), 404, `Schedule ${id} not found`);
      expectError(await call('GET', `/${id}/runs`, token), 404, `Schedule ${id} not found`);
      expectError(await call('DELETE', `/${id}`, token), 404, `Schedule ${id} not found`);
    }
    expect((await call('GET', `/${s.id}`)).statusCode).toBe(200);
    const theirs = (await call('GET', '', other.apiKey)).json().data as Json[];
    expect(theirs.map((x) => x.id)).not.toContain(s.id);
    expect(await app.db.scheduleRuns.countDocuments({ schedule_id: new Types.ObjectId(s.id) })).toBe(0);
  });

  test('list pages newest first', async () => {
    const a = await created();
    const b = await created();
    const page = await call('GET', '?limit=1');
    expect(page.json().data.map((x: Json) => x.id)).toEqual([b.id]);
    const next = await call('GET', `?limit=1&cursor=${page.json().next_cursor}`);
    expect(next.json().data.map((x: Json) => x.id)).toEqual([a.id]);
  });

  test('a new cron or time zone moves next_run_at; pausing clears it; resuming sets the next time after now', async () => {
    const s = await created();
    const moved = await call('PUT', `/${s.id}`, owner.apiKey, { cron: '30 6 * * *', timezone: 'America/New_York' });
    expect(moved.statusCode).toBe(200);
    const next = new Date(moved.json().data.next_run_at);
    expect(new Intl.DateTimeFormat('en-GB', { timeZone: 'America/New_York', hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }).format(next)).toBe('06:30');
    const paused = await call('PUT', `/${s.id}`, owner.apiKey, { active: false });
    expect(paused.json().data).toMatchObject({ active: false, next_run_at: null });
    const resumed = await call('PUT', `/${s.id}`, owner.apiKey, { active: true });
    expect(resumed.json().data.next_run_at).toBe(next.toISOString());
    const renamed = await call('PUT', `/${s.id}`, owner.apiKey, { name: 'renamed', transfer: transferBody({ destinationPath: '/elsewhere' }) });
    expect(renamed.json().data).toMatchObject({ name: 'renamed', next_run_at: next.toISOString(), transfer: { destinationPath: '/elsewhere' } });
    expect((await auditOf(s.id)).map((a) => a.action)).toEqual(['schedule.create', 'schedule.update', 'schedule.update', 'schedule.update', 'schedule.update']);
  });

  test('update checks what it is given: 400s naming the field, and an empty body', async () => {
    const s = await created();
    expectError(await call('PUT', `/${s.id}`, owner.apiKey, {}), 400, /^body must contain at least one of/);
    expectError(await call('PUT', `/${s.id}`, owner.apiKey, { cron: '* * * * * *' }), 400, /^cron must have exactly 5 fields/);
    expectError(await call('PUT', `/${s.id}`, owner.apiKey, { timezone: 'Nowhere/Town' }), 400, /^timezone "Nowhere\/Town"/);
    expectError(await call('PUT', `/${s.id}`, owner.apiKey, { workflowId: new Types.ObjectId().toHexString() }), 400, /^workflowId: workflow [0-9a-f]{24} not found$/);
    expectError(await call('PUT', `/${s.id}`, owner.apiKey, { transfer: transferBody({ sourcePath: '/{{params.missing}}' }) }), 400, /^transfer\.sourcePath names the parameter "missing"/);
    expect((await call('GET', `/${s.id}`)).json().data).toMatchObject({ cron: '0 2 * * *', timezone: 'UTC', transfer: { sourcePath: '/in' } });
  });

  test('delete removes the schedule and its runs, not their transfers; audited', async () => {
    const s = await created(body({ overlap: 'queue' }));
    const run = (await call('POST', `/${s.id}/run`)).json().data as { transfer_id: string };
    const res = await call('DELETE', `/${s.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual({ id: s.id, deleted: true });
    expectError(await call('GET', `/${s.id}`), 404);
    expect(await app.db.scheduleRuns.countDocuments({ schedule_id: new Types.ObjectId(s.id) })).toBe(0);
    expect((await getTransfer(app, owner.apiKey, run.transfer_id)).status).toBe('queued');
    expect((await auditOf(s.id)).map((a) => a.action)).toEqual(['schedule.create', 'schedule.run', 'schedule.delete']);
  });
});

describe('POST /schedules/:id/run and GET /schedules/:id/runs', () => {
  test('a run creates and queues a transfer with its paths rendered for the run (parameters, date in the zone, run id)', async () => {
    const s = await created(body({
      timezone: 'Pacific/Kiritimati',
      transfer: transferBody({ sourcePath: '/in/{{params.region}}', destinationPath: '/out/{{date:YYYY-MM-DD}}/{{run.id}}' }),
    }));
    const res = await call('POST', `/${s.id}/run`);
    expect(res.statusCode).toBe(201);
    const run = res.json().data;
    expect(Object.keys(run).sort()).toEqual(['error', 'id', 'schedule_id', 'scheduled_for', 'started_at', 'status', 'transfer_id', 'trigger', 'workflow_run_id']);
    expect(run).toMatchObject({ schedule_id: s.id, trigger: 'manual', status: 'queued', workflow_run_id: null, error: null });
    const job = await getTransfer(app, owner.apiKey, run.transfer_id);
    // UTC+14: the date there, which differs from UTC's for ten hours a day.
    const day = new Intl.DateTimeFormat('en-CA', { timeZone: 'Pacific/Kiritimati' }).format(new Date(run.scheduled_for));
    expect(job).toMatchObject({ name: s.name, sourcePath: '/in/eu', destinationPath: `/out/${day}/${run.id}`, status: 'queued' });
    expect(job.queued_at).not.toBeNull(); // executed: waiting for an agent
    expect(await runsOf(s.id)).toEqual([run]);
    expect((await call('GET', `/${s.id}`)).json().data).toMatchObject({ last_run_at: run.started_at, last_status: 'queued' });
    const audit = (await auditOf(s.id)).find((a) => a.action === 'schedule.run');
    expect(audit).toMatchObject({ outcome: 'success', details: { run_id: run.id, transfer_id: run.transfer_id, status: 'queued' } });
  });

  test('overlap skip: a run while the previous transfer waits is recorded skipped; once it ended, the next one runs', async () => {
    const s = await created();
    const first = (await call('POST', `/${s.id}/run`)).json().data;
    const second = (await call('POST', `/${s.id}/run`)).json().data;
    expect(second).toMatchObject({ status: 'skipped', transfer_id: null, error: `the transfer ${first.transfer_id} of the previous run had not ended (overlap: skip)` });
    expect((await call('GET', `/${s.id}`)).json().data.last_status).toBe('skipped');
    expect((await app.inject({ method: 'POST', url: `/api/v1/transfers/${first.transfer_id}/cancel`, headers: auth(owner.apiKey) })).statusCode).toBe(200);
    const third = (await call('POST', `/${s.id}/run`)).json().data;
    expect(third).toMatchObject({ status: 'queued' });
    expect(third.transfer_id).not.toBe(first.transfer_id);
    const runs = await runsOf(s.id);
    expect(runs.map((r) => [r.id, r.status])).toEqual([[third.id, 'queued'], [second.id, 'skipped'], [first.id, 'cancelled']]);
  });

  test('overlap queue: runs start while the previous transfer waits', async () => {
    const s = await created(body({ overlap: 'queue' }));
    const a = (await call('POST', `/${s.id}/run`)).json().data;
    const b = (await call('POST', `/${s.id}/run`)).json().data;
    expect([a.status, b.status]).toEqual(['queued', 'queued']);
    expect(a.transfer_id).not.toBe(b.transfer_id);
  });

  test('a run whose parameter was deleted since fails, naming the field; a run whose transfer was deleted shows unknown', async () => {
    const param = await app.inject({ method: 'POST', url: '/api/v1/parameters', headers: auth(owner.apiKey), payload: { name: 'bucket_dir', value: 'b1' } });
    const s = await created(body({ overlap: 'queue', transfer: transferBody({ destinationPath: '/{{params.bucket_dir}}' }) }));
    const ok = (await call('POST', `/${s.id}/run`)).json().data;
    await app.inject({ method: 'DELETE', url: `/api/v1/parameters/${param.json().data.id}`, headers: auth(owner.apiKey) });
    const res = await call('POST', `/${s.id}/run`);
    expect(res.statusCode).toBe(201);
    expect(res.json().data).toMatchObject({ status: 'failed', transfer_id: null, error: 'transfer.destinationPath names the parameter "bucket_dir", which does not exist' });
    expect((await auditOf(s.id)).at(-1)).toMatchObject({ action: 'schedule.run', outcome: 'failure' });
    await app.inject({ method: 'POST', url: `/api/v1/transfers/${ok.transfer_id}/cancel`, headers: auth(owner.apiKey) });
    expect((await app.inject({ method: 'DELETE', url: `/api/v1/transfers/${ok.transfer_id}`, headers: auth(owner.apiKey) })).statusCode).toBe(200);
    const runs = await runsOf(s.id);
    expect(runs.at(-1)).toMatchObject({ id: ok.id, status: 'unknown', error: `its transfer ${ok.transfer_id} was deleted` });
  });

  test('runs page newest first', async () => {
    const s = await created(body({ overlap: 'queue' }));
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await call('POST', `/${s.id}/run`)).json().data.id);
    const page = await call('GET', `/${s.id}/runs?limit=2`);
    expect(page.json().data.map((r: Json) => r.id)).toEqual([ids[2], ids[1]]);
    const rest = await call('GET', `/${s.id}/runs?limit=2&cursor=${page.json().next_cursor}`);
    expect(rest.json().data.map((r: Json) => r.id)).toEqual([ids[0]]);
    expect(rest.json().next_cursor).toBeNull();
  });
});

describe('firing', () => {
  // These passes are driven with their own clock: the app's own loop would race them at a boundary.
  beforeAll(() => app.scheduleFiring.stop());
  afterAll(() => app.scheduleFiring.start());

  test('after downtime one catch-up run fires for the newest missed due time only, then next_run_at is past now; audited as the system', async () => {
    const s = await created(body({ cron: '*/5 * * * *', overlap: 'queue' }));
    const now = new Date();
    // As if the control plane had been down for a day: the due time it kept is a day old.
    const dayAgo = new Date(Math.floor((now.getTime() - 86_400_000) / 300_000) * 300_000);
    await app.db.schedules.updateOne({ _id: new Types.ObjectId(s.id) }, { $set: { next_run_at: dayAgo } });
    await app.scheduleFiring.tick(now);
    await app.scheduleFiring.tick(now);
    const runs = await runsOf(s.id);
    const newest = new Date(Math.floor(now.getTime() / 300_000) * 300_000);
    expect(runs.map((r) => [r.trigger, r.scheduled_for, r.status])).toEqual([['schedule', newest.toISOString(), 'queued']]);
    const after = (await call('GET', `/${s.id}`)).json().data;
    expect(after.next_run_at).toBe(new Date(newest.getTime() + 300_000).toISOString());
    expect(after.last_status).toBe('queued');
    const fired = (await auditOf(s.id)).filter((a) => a.action === 'schedule.fire');
    expect(fired).toHaveLength(1);
    expect(fired[0]).toMatchObject({ actor: { type: 'system', id: null }, outcome: 'success', details: { run_id: runs[0]!.id, transfer_id: runs[0]!.transfer_id } });
  });

  test('an inactive schedule never fires', async () => {
    const s = await created(body({ cron: '* * * * *' }));
    await app.db.schedules.updateOne({ _id: new Types.ObjectId(s.id) }, { $set: { active: false, next_run_at: new Date(Date.now() - 1000) } });
    await app.scheduleFiring.tick();
    expect(await runsOf(s.id)).toEqual([]);
  });
});

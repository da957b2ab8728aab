import { setTimeout as sleep } from 'node:timers/promises';
import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, loopPasses, type TestAccount } from './helper.js';
import { eventually } from './protocol-client.js';
import { makeConnection, uniqueName } from './fixtures.js';

/**
 * Two control-plane instances over one database (scope-areas.md "Schedules"): each runs its own
 * firing loop, nothing but the database connects them, and each due time of each schedule fires
 * exactly once, within 5 s of its `next_run_at`.
 */
let a: App;
let b: App;
let owner: TestAccount;
let src: string;
let dst: string;

beforeAll(async () => {
  a = await buildTestApp();
  b = await buildTestApp({ databaseName: a.config.databaseName, masterKeys: a.config.masterKeys });
  owner = await createAccount(a);
  src = (await makeConnection(a, owner.apiKey, 'sftp')).id;
  dst = (await makeConnection(a, owner.apiKey, 's3')).id;
});
afterAll(async () => {
  await b.close();
  await a.close();
});

/** `n` schedules firing every minute (overlap queue, so every due time makes a transfer). */
async function everyMinute(n: number): Promise<Types.ObjectId[]> {
  const ids: Types.ObjectId[] = [];
  for (let i = 0; i < n; i++) {
    const res = await a.inject({
      method: 'POST', url: '/api/v1/schedules', headers: auth(owner.apiKey),
      payload: {
        name: uniqueName('every-minute'), cron: '* * * * *', overlap: 'queue',
        transfer: { sourceConnectionId: src, sourcePath: '/in', destinationConnectionId: dst, destinationPath: '/out/{{run.id}}' },
      },
    });
    if (res.statusCode !== 201) throw new Error(`create schedule: ${res.statusCode} ${res.body}`);
    ids.push(new Types.ObjectId(res.json().data.id as string));
  }
  return ids;
}

/** Every run of these schedules, and every transfer made for them. */
async function firedFor(ids: Types.ObjectId[]) {
  const runs = await a.db.scheduleRuns.find({ schedule_id: { $in: ids } }).lean();
  const transfers = await a.db.transfers.countDocuments({ _id: { $in: runs.flatMap((r) => (r.transfer_id ? [r.transfer_id] : [])) } });
  return { runs, transfers };
}

test('both instances running their loops: every due schedule fires once, within 5 s of next_run_at', async () => {
  // Stay clear of a minute's end: a due time of the next minute would rightly fire too.
  const second = new Date().getUTCSeconds();
  if (second > 45) await sleep((61 - second) * 1000);
  const ids = await everyMinute(8);
  const dueAt = new Date(Date.now() - 200);
  await a.db.schedules.updateMany({ _id: { $in: ids } }, { $set: { next_run_at: dueAt } });

  await eventually(async () => (await firedFor(ids)).runs.length >= ids.length, 'every schedule fired');
  // Both loops get two more passes at them: none may fire them again.
  await Promise.all([loopPasses(a.scheduleFiring, 'tick', 2), loopPasses(b.scheduleFiring, 'tick', 2)]);

  const { runs, transfers } = await firedFor(ids);
  expect(runs).toHaveLength(ids.length);
  expect(new Set(runs.map((r) => String(r.schedule_id))).size).toBe(ids.length);
  expect(transfers).toBe(ids.length);
  const minute = new Date(Math.floor(dueAt.getTime() / 60_000) * 60_000);
  for (const run of runs) {
    expect(run).toMatchObject({ trigger: 'schedule', state: 'started', scheduled_for: minute });
    expect(run.started_at.getTime() - dueAt.getTime()).toBeLessThan(5_000);
  }
  const after = await a.db.schedules.find({ _id: { $in: ids } }).lean();
  for (const s of after) expect(s.next_run_at).toEqual(new Date(minute.getTime() + 60_000));
});

test('passes of both instances racing over the same due schedules fire each once (the insert of the run is the claim)', async () => {
  await Promise.all([a.scheduleFiring.stop(), b.scheduleFiring.stop()]);
  try {
    const ids = await everyMinute(15);
    await a.db.schedules.updateMany({ _id: { $in: ids } }, { $set: { next_run_at: new Date(Date.now() - 1_000) } });
    const now = new Date();
    await Promise.all([a, b, a, b, a, b].map((app) => app.scheduleFiring.tick(now)));
    const { runs, transfers } = await firedFor(ids);
    expect(runs).toHaveLength(ids.length);
    expect(new Set(runs.map((r) => String(r.schedule_id))).size).toBe(ids.length);
    expect(transfers).toBe(ids.length);
    const audit = await a.db.auditEvents.countDocuments({ action: 'schedule.fire', 'resource.id': { $in: ids.map(String) } });
    expect(audit).toBe(ids.length);
  } finally {
    a.scheduleFiring.start();
    b.scheduleFiring.start();
  }
});

test('overlap skip is exact too: runs of one schedule started together on both instances make one transfer', async () => {
  const res = await a.inject({
    method: 'POST', url: '/api/v1/schedules', headers: auth(owner.apiKey),
    payload: { name: uniqueName('exclusive'), cron: '0 3 * * *', transfer: { sourceConnectionId: src, sourcePath: '/in', destinationConnectionId: dst, destinationPath: '/out' } },
  });
  const id = res.json().data.id as string;
  const runs = await Promise.all([a, b, a, b, a, b].map(async (app) => {
    const r = await app.inject({ method: 'POST', url: `/api/v1/schedules/${id}/run`, headers: auth(owner.apiKey) });
    expect(r.statusCode).toBe(201);
    return r.json().data as { status: string; transfer_id: string | null; error: string | null };
  }));
  const started = runs.filter((r) => r.transfer_id);
  expect(started).toHaveLength(1);
  for (const r of runs.filter((x) => !x.transfer_id)) {
    expect(r.status).toBe('skipped');
    expect(r.error).toMatch(/\(overlap: skip\)$/);
  }
  // Once that transfer has ended, the next run takes its place.
  await a.inject({ method: 'POST', url: `/api/v1/transfers/${started[0]!.transfer_id}/cancel`, headers: auth(owner.apiKey) });
  const next = await b.inject({ method: 'POST', url: `/api/v1/schedules/${id}/run`, headers: auth(owner.apiKey) });
  expect(next.json().data).toMatchObject({ status: 'queued' });
});

import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, login, type TestAccount } from './helper.js';
import { makeAgent, makeConnection, uniqueName } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/**
 * A schedule or watcher runs with its owner's authority (docs/security.md "Escalation rules"):
 * the key or user that last saved it, checked again each time it fires. An owner that lost it
 * (revoked, expired, narrowed, demoted) runs nothing through it: the run or event fails saying so,
 * the audit record is `denied`, and an authorised caller takes it over by saving it (PUT).
 */
let app: App;
let owner: TestAccount;
let src: string;
let dst: string;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200 });
  await app.listen({ host: '127.0.0.1', port: 0 });
  owner = await createAccount(app);
  src = (await makeConnection(app, owner.apiKey, 'sftp')).id;
  dst = (await makeConnection(app, owner.apiKey, 's3')).id;
});
afterAll(() => app.close());

type Json = Record<string, unknown>;
const call = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, token = owner.apiKey, payload?: Json) =>
  app.inject({ method, url: `/api/v1${url}`, headers: auth(token), ...(payload ? { payload } : {}) });
async function ok(method: 'POST' | 'PUT', url: string, token: string, payload: Json = {}, status = method === 'POST' ? 201 : 200) {
  const res = await call(method, url, token, payload);
  if (res.statusCode !== status) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
  return res.json().data as Json & { id: string };
}
/** A key with `scopes`, and its id. */
async function keyWith(scopes: string[], extra: Json = {}) {
  const data = await ok('POST', '/api-keys', owner.apiKey, { name: 'automation', scopes, ...extra });
  return { id: data.id, key: data.key as string };
}
const transfer = () => ({ sourceConnectionId: src, sourcePath: '/in', destinationConnectionId: dst, destinationPath: '/out' });
const workflow = async () => (await ok('POST', '/workflows', owner.apiKey, {
  name: uniqueName('wf'), steps: [{ type: 'transfer', sourceConnectionId: src, sourcePath: '/a', destinationConnectionId: dst, destinationPath: '/b' }],
})).id;
const transfersOf = () => app.db.transfers.countDocuments({ account_id: new Types.ObjectId(owner.accountId) });
type Run = { status: string; error: string | null; transfer_id: string | null };
const runNow = async (id: string, token = owner.apiKey) => (await ok('POST', `/schedules/${id}/run`, token)) as unknown as Run;
const audits = (id: string, action: string) => app.db.auditEvents.find({ 'resource.id': id, action }).sort({ _id: 1 }).lean();
const AUTOMATION = ['schedules:read', 'schedules:write', 'watchers:read', 'watchers:write', 'transfers:write'];

describe('schedules', () => {
  test('a schedule shows its owner; once the key that saved it is revoked its runs fail saying so (denied, no transfer) until an authorised caller re-saves it', async () => {
    const k = await keyWith(AUTOMATION);
    const s = await ok('POST', '/schedules', k.key, { name: uniqueName('s'), cron: '0 2 * * *', transfer: transfer() });
    expect(s.owner).toEqual({ type: 'api_key', id: k.id });
    expect((await call('DELETE', `/api-keys/${k.id}`)).statusCode).toBe(200);

    const before = await transfersOf();
    const run = await runNow(s.id);
    expect(run).toMatchObject({ status: 'failed', transfer_id: null });
    expect(run.error).toBe(
      `The schedule did not run: its owner (API key ${k.id}) was revoked, so it no longer has the authority to run it (it needs transfers:write); ` +
      `a caller holding that authority takes it over by saving it again (PUT /schedules/${s.id})`,
    );
    expect(await transfersOf()).toBe(before);
    const [denied] = await audits(s.id, 'schedule.run');
    expect(denied).toMatchObject({ outcome: 'denied', details: { status: 'failed', reason: 'owner authority' } });

    // Re-saved by a caller holding the authority: it is that caller's now, and runs.
    const taken = await ok('PUT', `/schedules/${s.id}`, owner.apiKey, { name: 'taken over' });
    expect((taken.owner as { type: string }).type).toBe('api_key');
    expect(taken.owner).not.toEqual(s.owner);
    const again = await runNow(s.id);
    expect(again.transfer_id).not.toBeNull();
    expect(await transfersOf()).toBe(before + 1);
  });

  test('a schedule of a workflow made by a member fires as that member: demoted to viewer, the firing loop records the run failed and denied, and starts no workflow run', async () => {
    const email = `m-${new Types.ObjectId()}@example.test`;
    const password = `pw-${new Types.ObjectId()}`;
    const user = await ok('POST', '/users', owner.apiKey, { email, password, role: 'member' });
    const session = await login(app, email, password);
    const s = await ok('POST', '/schedules', session, { name: uniqueName('s'), cron: '* * * * *', workflowId: await workflow() });
    expect(s.owner).toEqual({ type: 'user', id: user.id });
    await ok('PUT', `/users/${user.id}`, owner.apiKey, { role: 'viewer' });

    const stored = await app.db.schedules.findById(s.id).lean();
    await app.scheduleFiring.tick(new Date(stored!.next_run_at!.getTime() + 1000));
    const runs = await eventually(async () => {
      const list = (await call('GET', `/schedules/${s.id}/runs`)).json().data as Array<{ status: string; error: string; workflow_run_id: string | null }>;
      return list.length > 0 ? list : null;
    }, 'the fired run');
    expect(runs[0]).toMatchObject({ status: 'failed', workflow_run_id: null });
    expect(runs[0]!.error).toBe(
      `The schedule did not run: its owner (user ${user.id}) no longer holds transfers:write, workflows:write, so it no longer has the authority ` +
      `to run it (it needs transfers:write and workflows:write); a caller holding that authority takes it over by saving it again (PUT /schedules/${s.id})`,
    );
    expect(await app.db.workflowRuns.countDocuments({ 'trigger.id': new Types.ObjectId(s.id) })).toBe(0);
    const [fired] = await audits(s.id, 'schedule.fire');
    expect(fired).toMatchObject({ outcome: 'denied', actor: { type: 'system' }, details: { reason: 'owner authority' } });
  });

  test('an expired owner key runs nothing; a schedule saved before owners were recorded runs with the account\'s authority', async () => {
    const k = await keyWith(AUTOMATION, { expires_in_days: 1 });
    const s = await ok('POST', '/schedules', k.key, { name: uniqueName('s'), cron: '0 2 * * *', transfer: transfer() });
    // The key's end has come (moved rather than waited for).
    await app.db.apiKeys.updateOne({ _id: new Types.ObjectId(k.id) }, { $set: { expires_at: new Date(Date.now() - 1000) } });
    expect((await runNow(s.id)).error).toMatch(/^The schedule did not run: its owner \(API key [0-9a-f]{24}\) expired, /);

    await app.db.schedules.updateOne({ _id: new Types.ObjectId(s.id) }, { $unset: { owner: 1 } });
    expect((await runNow(s.id)).transfer_id).not.toBeNull();
    expect((await call('GET', `/schedules/${s.id}`)).json().data.owner).toBeNull();
  });
});

describe('watchers', () => {
  const file = (path: string) => ({ path, name: path.slice(path.lastIndexOf('/') + 1), size: 10, version: `size:10:mtime:${path}`, modified_at: new Date().toISOString() });

  test('a watcher whose owner key was revoked fails its events saying so (denied, no transfer); re-saved by an authorised key it acts again', async () => {
    const k = await keyWith(AUTOMATION);
    const w = await ok('POST', '/watchers', k.key, {
      name: uniqueName('w'), connectionId: src, path: '/inbox', pattern: '*.csv', stable_seconds: 0,
      action: { transfer: { destinationConnectionId: dst, destinationPath: '/archive' } },
    });
    expect(w.owner).toEqual({ type: 'api_key', id: k.id });
    const agent = await makeAgent(app, owner.apiKey);
    const { client } = await ProtocolClient.connect(app, agent.token, { watch: true, connector_types: ['sftp', 's3'] });
    await eventually(async () => client.all('watch.set').some((m) => m.payload.watchers.some((x: { id: string }) => x.id === w.id)), 'the watcher in its set');
    const acked = (seq: number) => eventually(async () => client.all('ack').some((m) => m.payload.seqs.includes(seq)), `report ${seq} acknowledged`);
    expect((await call('DELETE', `/api-keys/${k.id}`)).statusCode).toBe(200);

    const before = await transfersOf();
    client.send('watch.found', { watcher_id: w.id, revision: 1, seq: 1, files: [file('inbox/a.csv'), file('inbox/b.csv')] });
    await acked(1);
    const events = (await call('GET', `/watchers/${w.id}/events`)).json().data as Array<{ action_status: string; error: string; transfer_id: string | null }>;
    expect(events).toHaveLength(2);
    for (const e of events) {
      expect(e).toMatchObject({ action_status: 'failed', transfer_id: null });
      expect(e.error).toBe(
        `The watcher did not act: its owner (API key ${k.id}) was revoked, so it no longer has the authority to run it (it needs transfers:write); ` +
        `a caller holding that authority takes it over by saving it again (PUT /watchers/${w.id})`,
      );
    }
    expect(await transfersOf()).toBe(before);
    expect(await app.db.auditEvents.countDocuments({ action: 'watcher.trigger', 'resource.id': w.id, outcome: 'denied', 'details.reason': 'owner authority' })).toBe(2);

    await ok('PUT', `/watchers/${w.id}`, owner.apiKey, { name: 'taken over' });
    client.send('watch.found', { watcher_id: w.id, revision: 1, seq: 2, files: [file('inbox/c.csv')] });
    await acked(2);
    expect(await transfersOf()).toBe(before + 1);
    client.close();
  });
});

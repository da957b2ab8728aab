import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, createKey, expectError } from './helper.js';
import { getAgent, getTransfer, makeAgent, makeConnection, makeTransfer, SECRET, transferAction, updateAgent } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/**
 * Agents are a trust boundary the account's administrators choose (docs/security.md "Agents:
 * approval", issue 24): an agent made by a key holding `agents:write` alone (or by a member) is
 * pending. It serves the connections pinned to it by `agent_id` and nothing else: no job, watcher
 * or test of a connection that names no agent or names a pool, however many slots it announces,
 * until an administrator approves it.
 */
let app: App;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200 });
  await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => app.close());

const call = (method: 'GET' | 'POST' | 'PUT', url: string, key: string, payload?: Record<string, unknown>) =>
  app.inject({ method, url: `/api/v1${url}`, headers: auth(key), ...(payload ? { payload } : {}) });
const approve = (key: string, id: string) => call('POST', `/agents/${id}/approve`, key);
const whyWatcherWaits = async (key: string, id: string) => (await call('GET', `/watchers/${id}`, key)).json().data.last_error as string | null;
/** Every connection id a fake agent was handed, by any frame. */
const handed = (client: ProtocolClient) => client.received.flatMap((m) => {
  const p = m.payload as Record<string, unknown> & { watchers?: Array<{ connection: { id: string } }> };
  return [p.source, p.destination, p.connection, ...(p.watchers ?? []).map((w) => w.connection)]
    .filter((c): c is { id: string } => !!c && typeof c === 'object' && 'id' in c).map((c) => c.id);
});

describe('agent approval', () => {
  test('an agents:write key\'s agent is pending: with 100 slots it gets no job, watcher or test of unpinned connections, only its pinned ones; approved, it takes work', async () => {
    const { apiKey: admin, accountId } = await createAccount(app);
    const narrow = await createKey(app, admin, ['agents:write']);
    const pending = await makeAgent(app, narrow);
    expect(pending).toMatchObject({ approved: false, approved_at: null, approved_by: null });
    const { client: p } = await ProtocolClient.connect(app, pending.token, { max_jobs: 100, watch: true, connector_types: ['sftp', 's3'] });

    const src = await makeConnection(app, admin, 'sftp');
    const dst = await makeConnection(app, admin, 's3');
    const first = await makeTransfer(app, admin, src.id, dst.id);
    // Only the pending agent online: the transfer is refused as when no agent is online, naming it.
    expectError(await transferAction(app, admin, first.id, 'execute'), 503,
      `No online agent can serve connections '${src.name}' and '${dst.name}' (needs sftp and s3 connectors); pending approval (POST /agents/:id/approve): '${pending.name}'`);
    expectError(await call('POST', `/connections/${src.id}/test`, admin), 503, new RegExp(`^No online agent can serve connection '${src.name}' .*'${pending.name}'$`));
    const watcher = (await call('POST', '/watchers', admin, {
      name: `w-${new Types.ObjectId()}`, connectionId: src.id, path: '/inbox', pattern: '*.csv', poll_interval_seconds: 10, stable_seconds: 3,
      action: { transfer: { destinationConnectionId: dst.id, destinationPath: '/archive' } },
    })).json().data as { id: string };
    await eventually(async () => /^No online agent that polls watchers serves /.test(await whyWatcherWaits(admin, watcher.id) ?? ''), 'the watcher waits for an agent');
    // The last check before a secret leaves refuses it too, and it may not replace one.
    await expect(app.connections.settingsFor(accountId, src.id, pending.id)).rejects.toMatchObject({ statusCode: 403 });
    await expect(app.connections.storeRotatedCredentials(accountId, pending.id, src.id, { password: 'mine' }, { password: '0'.repeat(64) })).rejects.toMatchObject({ statusCode: 404 });

    // An approved agent with one slot takes the transfer and the watcher; the pending one, idle with 100, takes neither.
    const approved = await makeAgent(app, admin);
    expect(approved).toMatchObject({ approved: true, approved_by: { type: 'api_key' } });
    const { client: a } = await ProtocolClient.connect(app, approved.token, { max_jobs: 1, watch: true, connector_types: ['sftp', 's3'] });
    expect((await transferAction(app, admin, first.id, 'execute', '?wait=false')).statusCode).toBe(202);
    const job = (await a.next('job.assign')).payload;
    expect(job).toMatchObject({ job_id: first.id, source: { id: src.id, credentials: { password: SECRET } } });
    await eventually(async () => a.all('watch.set').some((s) => s.payload.watchers.some((w) => w.id === watcher.id)), 'the approved agent polls the watcher');

    // A second transfer waits for the busy approved agent; one between connections pinned to the
    // pending agent runs there: the scheduling pass that started it left the waiting one queued.
    const second = await makeTransfer(app, admin, src.id, dst.id);
    expect((await transferAction(app, admin, second.id, 'execute', '?wait=false')).statusCode).toBe(202);
    const pinnedSrc = await makeConnection(app, admin, 'sftp', { agent_id: pending.id });
    const pinnedDst = await makeConnection(app, admin, 's3', { agent_id: pending.id });
    const own = await makeTransfer(app, admin, pinnedSrc.id, pinnedDst.id);
    expect((await transferAction(app, admin, own.id, 'execute', '?wait=false')).statusCode).toBe(202);
    expect((await p.next('job.assign')).payload.job_id).toBe(own.id);
    expect(await getTransfer(app, admin, second.id)).toMatchObject({ status: 'queued' });
    expect(p.all('job.assign').map((m) => m.payload.job_id)).toEqual([own.id]);
    expect(p.all('connection.test')).toEqual([]);
    expect(handed(p).every((id) => id === pinnedSrc.id || id === pinnedDst.id)).toBe(true);
    expect(JSON.stringify(p.received)).not.toContain(src.id);

    // The narrow key cannot approve; an administrator can, once, audited; then the waiting transfer starts on it.
    expectError(await approve(narrow, pending.id), 403, /^Approving an agent needs an administrator/);
    expect(await app.db.auditEvents.countDocuments({ action: 'agent.approve', 'resource.id': pending.id, outcome: 'denied' })).toBe(1);
    const res = await approve(admin, pending.id);
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ id: pending.id, approved: true, approved_by: { type: 'api_key' } });
    expect((await approve(admin, pending.id)).statusCode).toBe(200);
    expect(await app.db.auditEvents.countDocuments({ action: 'agent.approve', 'resource.id': pending.id, outcome: 'success' })).toBe(1);
    expect((await p.next('job.assign')).payload).toMatchObject({ job_id: second.id, source: { id: src.id } });
    p.close();
    a.close();
  });

  test('a pending agent is in no pool, whatever its labels say; approved, it serves the pool', async () => {
    const { apiKey: admin } = await createAccount(app);
    const narrow = await createKey(app, admin, ['agents:write']);
    const pending = await makeAgent(app, narrow, { labels: ['fra1'] });
    const { client } = await ProtocolClient.connect(app, pending.token, { max_jobs: 10, labels: ['fra1'], connector_types: ['sftp', 's3'] });
    expect(await getAgent(app, admin, pending.id)).toMatchObject({ approved: false, labels: ['fra1'], agent_labels: ['fra1'], pools: [], status: 'online' });
    const src = await makeConnection(app, admin, 'sftp', { agent_pool: 'fra1' });
    const dst = await makeConnection(app, admin, 's3', { agent_pool: 'fra1' });
    const job = await makeTransfer(app, admin, src.id, dst.id);
    expectError(await transferAction(app, admin, job.id, 'execute'), 503, new RegExp(`^No online agent of pool 'fra1' can serve connection '${src.name}' .*pending approval .*'${pending.name}'$`));

    expect((await approve(admin, pending.id)).json().data).toMatchObject({ approved: true, pools: ['fra1'] });
    expect((await transferAction(app, admin, job.id, 'execute', '?wait=false')).statusCode).toBe(202);
    expect((await client.next('job.assign')).payload).toMatchObject({ job_id: job.id, source: { id: src.id } });
    client.close();
  });

  test('labels and max_jobs: agents:write while pending, an administrator\'s once approved; the name stays agents:write; an agent stored before approval counts as approved', async () => {
    const { apiKey: admin, email, password } = await createAccount(app);
    const narrow = await createKey(app, admin, ['agents:write', 'agents:read']);
    const agent = await makeAgent(app, narrow);
    expect((await updateAgent(app, narrow, agent.id, { labels: ['edge'], max_jobs: 2 })).statusCode).toBe(200);
    expect((await approve(admin, agent.id)).statusCode).toBe(200);
    expectError(await updateAgent(app, narrow, agent.id, { max_jobs: 50 }), 403, /^Changing max_jobs of an approved agent needs an administrator .*: the calling key does not hold every scope$/);
    expectError(await updateAgent(app, narrow, agent.id, { labels: ['edge', 'fra1'] }), 403, /^Changing labels of an approved agent needs an administrator/);
    expect(await app.db.auditEvents.countDocuments({ action: 'agent.update', 'resource.id': agent.id, outcome: 'denied' })).toBe(2);
    // Unchanged values are no change.
    expect((await updateAgent(app, narrow, agent.id, { labels: ['edge'], max_jobs: 2, name: `renamed-${new Types.ObjectId()}` })).statusCode).toBe(200);
    expect(await getAgent(app, narrow, agent.id)).toMatchObject({ labels: ['edge'], max_jobs: 2, approved: true });
    // An owner's session is an administrator.
    const login = await app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password } });
    expect((await updateAgent(app, login.json().data.token, agent.id, { max_jobs: 3 })).statusCode).toBe(200);

    const old = await makeAgent(app, narrow);
    await app.db.agents.updateOne({ _id: new Types.ObjectId(old.id) }, { $unset: { approved: 1, approved_at: 1, approved_by: 1 } });
    expect(await getAgent(app, narrow, old.id)).toMatchObject({ approved: true, approved_at: null, approved_by: null });
    expectError(await updateAgent(app, narrow, old.id, { labels: ['x'] }), 403, /^Changing labels of an approved agent/);
    const list = (await call('GET', '/agents', narrow)).json().data as Array<{ id: string; approved: boolean }>;
    expect(list.find((a) => a.id === agent.id)?.approved).toBe(true);
  });
});

import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import type { AgentSession, RelayStarter } from '../src/plugins/app/agents/index.js';
import type { StoredTransfer } from '../src/plugins/app/transfers/index.js';
import { auth, buildTestApp, createAccount, expectError, loopPasses } from './helper.js';
import { counters, getAgent, getTransfer, makeAgent, makeConnection, makeTransfer, transferAction, updateAgent } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/**
 * Pools and relays as the scheduler sees them (issue 14): a connection names one agent
 * (`agent_id`), the agents of a pool (`agent_pool`: labels given by PUT /agents or `--label`), or
 * any; a transfer no one agent serves is relayed between two, and only then. The relay's
 * forwarding is not tested here: a fake RelayStarter records what the dispatcher hands it.
 */

/** A fake RelayStarter: records each call; fails when told to. */
class FakeRelays implements RelayStarter {
  readonly started: Array<{ job: StoredTransfer; destination: string }> = [];
  failWith: string | null = null;
  async start(job: StoredTransfer, destination: AgentSession): Promise<void> {
    this.started.push({ job, destination: destination.agent.id });
    if (this.failWith) throw new Error(this.failWith);
  }
}

const relays = new FakeRelays();
let app: App;
let plain: App;

beforeAll(async () => {
  const settings = { dispatchPollMs: 50, agentHeartbeatMs: 200, jobLeaseMs: 2_000 };
  app = await buildTestApp(settings);
  app.dispatcher.relayWith(relays);
  await app.listen({ host: '127.0.0.1', port: 0 });
  // Without a RelayStarter: this control plane cannot relay.
  plain = await buildTestApp(settings);
  plain.dispatcher.relayWith(null);
  await plain.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await plain.close();
  await app.close();
});

/**
 * Two whole passes of the coordination loop from now on: each schedules, then dispatches, so what
 * has not started by then is waiting (a start is in the database, and its assign sent, by the end of its pass).
 */
const settle = () => loopPasses(app.dispatcher, 'tick', 2);

/** A connected fake agent of the account. */
async function agentOf(on: App, key: string, hello: { connector_types?: Array<'sftp' | 's3' | 'webdav'>; labels?: string[]; relay?: boolean; max_jobs?: number } = {}, extra: Record<string, unknown> = {}) {
  const agent = await makeAgent(on, key, extra);
  const { client } = await ProtocolClient.connect(on, agent.token, hello);
  return { ...agent, client };
}

const execute = async (on: App, key: string, id: string) => {
  const res = await transferAction(on, key, id, 'execute', '?wait=false');
  expect(res.statusCode).toBe(202);
};

describe('pools', () => {
  test('an agent\'s pools are the account\'s labels and its operator\'s --label, said apart', async () => {
    const { apiKey: key } = await createAccount(app);
    const agent = await agentOf(app, key, { labels: ['gpu', 'eu-west'] }, { labels: ['eu-west', 'dc=fra1'] });
    expect(await getAgent(app, key, agent.id)).toMatchObject({ labels: ['eu-west', 'dc=fra1'], agent_labels: ['gpu', 'eu-west'], pools: ['eu-west', 'dc=fra1', 'gpu'] });
    await updateAgent(app, key, agent.id, { labels: [] });
    expect(await getAgent(app, key, agent.id)).toMatchObject({ labels: [], agent_labels: ['gpu', 'eu-west'], pools: ['gpu', 'eu-west'] });
    agent.client.close();
  });

  test('a connection naming a pool runs only on the pool\'s agents; an agent joining it by PUT takes work at once', async () => {
    const { apiKey: key } = await createAccount(app);
    const member = await agentOf(app, key, { labels: ['fra1'], max_jobs: 1 });
    const outsider = await agentOf(app, key, { max_jobs: 4 });
    const src = await makeConnection(app, key, 'sftp', { agent_pool: 'fra1' });
    const dst = await makeConnection(app, key, 's3', { agent_pool: 'fra1' });
    expect((await app.inject({ method: 'GET', url: `/api/v1/connections/${src.id}`, headers: auth(key) })).json().data).toMatchObject({ agent_pool: 'fra1', agent_id: null });
    const [a, b] = [await makeTransfer(app, key, src.id, dst.id), await makeTransfer(app, key, src.id, dst.id)];
    await execute(app, key, a.id);
    await execute(app, key, b.id);
    expect((await member.client.next('job.assign')).payload.job_id).toBe(a.id);
    await settle();
    // The member is busy and the outsider idle: b waits for a member.
    expect(outsider.client.all('job.assign')).toEqual([]);
    expect(await getTransfer(app, key, b.id)).toMatchObject({ status: 'queued', queue_position: 1 });

    await updateAgent(app, key, outsider.id, { labels: ['fra1'] });
    expect((await outsider.client.next('job.assign')).payload.job_id).toBe(b.id);
    expect(await getTransfer(app, key, b.id)).toMatchObject({ status: 'in-progress', agent_id: outsider.id, mode: 'direct' });
    member.client.close();
    outsider.client.close();
  });

  test('a pool with no online member: execute is 503 naming the pool; agent_id pins to one agent', async () => {
    const { apiKey: key } = await createAccount(app);
    const online = await agentOf(app, key);
    const src = await makeConnection(app, key, 'sftp', { agent_pool: 'nobody-here' });
    const dst = await makeConnection(app, key, 's3');
    const job = await makeTransfer(app, key, src.id, dst.id);
    expectError(await transferAction(app, key, job.id, 'execute'), 503, `No online agent of pool 'nobody-here' can serve connection '${src.name}' (needs sftp connector)`);

    const pinnedTo = await agentOf(app, key);
    const pinned = await makeConnection(app, key, 'sftp', { agent_id: pinnedTo.id });
    const other = await makeTransfer(app, key, pinned.id, dst.id);
    await execute(app, key, other.id);
    expect((await pinnedTo.client.next('job.assign')).payload.job_id).toBe(other.id);
    expect(online.client.all('job.assign')).toEqual([]);
    online.client.close();
    pinnedTo.client.close();
  });

  test('agent_id and agent_pool are exclusive (400 naming the field); clearing one lets the other be set', async () => {
    const { apiKey: key } = await createAccount(app);
    const agent = await makeAgent(app, key);
    const post = (payload: Record<string, unknown>) => makeConnection(app, key, 'sftp', payload).catch((err: Error) => err.message);
    expect(await post({ agent_id: agent.id, agent_pool: 'p' })).toMatch(/^create connection: 400 .*body\.agent_pool cannot be set together with agent_id/);
    expect(await post({ agent_pool: 'not a label' })).toMatch(/^create connection: 400 .*body\.agent_pool /);
    const pinned = await makeConnection(app, key, 'sftp', { agent_id: agent.id });
    const put = (payload: Record<string, unknown>) => app.inject({ method: 'PUT', url: `/api/v1/connections/${pinned.id}`, headers: auth(key), payload });
    const credentials = { username: 'u', password: 'p' };
    expectError(await put({ agent_pool: 'p', credentials }), 400, /^body\.agent_pool cannot be set together with agent_id: .*send agent_id: null to change/);
    // Moving stored credentials to a pool needs them again (docs/security.md "Credential binding").
    expectError(await put({ agent_pool: 'p', agent_id: null }), 400, /^agent_id cannot change without credentials/);
    expect((await put({ agent_pool: 'p', agent_id: null, credentials })).json().data).toMatchObject({ agent_id: null, agent_pool: 'p' });
  });

  test('a connection test runs on an agent of the connection\'s pool', async () => {
    const { apiKey: key } = await createAccount(app);
    const outsider = await agentOf(app, key);
    const member = await agentOf(app, key, { labels: ['lab'] });
    const conn = await makeConnection(app, key, 'sftp', { agent_pool: 'lab' });
    const res = app.inject({ method: 'POST', url: `/api/v1/connections/${conn.id}/test`, headers: auth(key) });
    const request = await member.client.next('connection.test');
    member.client.send('connection.test.result', { request_id: request.payload.request_id, success: true, message: 'ok', latency_ms: 1 });
    expect((await res).json().data).toMatchObject({ success: true });
    expect(outsider.client.all('connection.test')).toEqual([]);
    outsider.client.close();
    member.client.close();
  });
});

describe('relays', () => {
  /** Agent A serves only the sftp source, agent B only the s3 destination, both relay-capable. */
  async function twoNetworks(on: App, relay = true) {
    const { apiKey: key } = await createAccount(on);
    const a = await agentOf(on, key, { connector_types: ['sftp'], relay, max_jobs: 2 });
    const b = await agentOf(on, key, { connector_types: ['s3'], relay, max_jobs: 2 });
    const src = await makeConnection(on, key, 'sftp', { agent_id: a.id });
    const dst = await makeConnection(on, key, 's3', { agent_id: b.id });
    return { key, a, b, src, dst };
  }

  test('no agent serves both ends: the destination agent gets a relayed job.assign without source settings; both slots are held; the starter is called', async () => {
    const n = await twoNetworks(app);
    const job = await makeTransfer(app, n.key, n.src.id, n.dst.id);
    await execute(app, n.key, job.id);
    const assign = (await n.b.client.next('job.assign')).payload;
    expect(assign).toMatchObject({ job_id: job.id, attempt: 1, relay: { source_type: 'sftp' }, destination: { id: n.dst.id } });
    expect(assign.source).toBeUndefined();
    expect(JSON.stringify(assign)).not.toContain(n.src.id);
    await eventually(async () => relays.started.some((s) => String(s.job._id) === job.id), 'relay started');
    const call = relays.started.find((s) => String(s.job._id) === job.id)!;
    expect(call.destination).toBe(n.b.id);
    expect(call.job).toMatchObject({ mode: 'relay', attempt: 1 });
    expect(String(call.job.agent_id)).toBe(n.b.id);
    expect(String(call.job.source_agent_id)).toBe(n.a.id);
    expect(await getTransfer(app, n.key, job.id)).toMatchObject({ status: 'in-progress', mode: 'relay', agent_id: n.b.id, source_agent_id: n.a.id });
    const slots = await app.db.agentSlots.find({ job_id: new Types.ObjectId(job.id) }).lean();
    expect(slots.map((s) => [String(s.agent_id), s.role]).sort()).toEqual([[n.a.id, 'source'], [n.b.id, 'run']].sort());
    expect((await getAgent(app, n.key, n.a.id))).toMatchObject({ running_jobs: [job.id], slots: { total: 2, running: 1, free: 1 } });
    expect(n.a.client.all('job.assign')).toEqual([]);

    n.b.client.send('job.accepted', { job_id: job.id });
    n.b.client.send('job.completed', { job_id: job.id, ...counters(1, 1, 5) });
    await eventually(async () => (await getTransfer(app, n.key, job.id)).status === 'completed', 'relayed job completed');
    // The slots are released right after the state changes (transfer-states.ts ended()): a read can fall in between.
    await eventually(async () => (await app.db.agentSlots.countDocuments({ job_id: new Types.ObjectId(job.id) })) === 0, 'both slots released');
    n.a.client.close();
    n.b.client.close();
  });

  test('direct is preferred whenever an online agent serves both, even a busy one: the transfer waits for it', async () => {
    const n = await twoNetworks(app);
    const both = await agentOf(app, n.key, { connector_types: ['sftp', 's3'], relay: true, max_jobs: 1 });
    const src = await makeConnection(app, n.key, 'sftp');
    const dst = await makeConnection(app, n.key, 's3');
    const [first, second] = [await makeTransfer(app, n.key, src.id, dst.id), await makeTransfer(app, n.key, src.id, dst.id)];
    await execute(app, n.key, first.id);
    await execute(app, n.key, second.id);
    expect((await both.client.next('job.assign')).payload.job_id).toBe(first.id);
    await settle();
    expect(await getTransfer(app, n.key, second.id)).toMatchObject({ status: 'queued', mode: null });
    expect(n.b.client.all('job.assign')).toEqual([]);
    both.client.send('job.accepted', { job_id: first.id });
    both.client.send('job.completed', { job_id: first.id, ...counters(1, 1, 5) });
    expect((await both.client.next('job.assign')).payload).toMatchObject({ job_id: second.id, source: { id: src.id } });
    for (const c of [both.client, n.a.client, n.b.client]) c.close();
  });

  test('agents that cannot relay: 503 saying so; a control plane without relays: 409 for two pinned agents, 503 for pools', async () => {
    const n = await twoNetworks(app, false);
    const job = await makeTransfer(app, n.key, n.src.id, n.dst.id);
    expectError(await transferAction(app, n.key, job.id, 'execute'), 503,
      `Connection '${n.src.name}' is served by agent '${n.a.name}' and connection '${n.dst.name}' by agent '${n.b.name}': no online agent serves both ends, and no pair of online relay-capable agents serves them`);
    n.a.client.close();
    n.b.client.close();

    const m = await twoNetworks(plain);
    const pinned = await makeTransfer(plain, m.key, m.src.id, m.dst.id);
    expectError(await transferAction(plain, m.key, pinned.id, 'execute'), 409,
      `Connection '${m.src.name}' is served by agent '${m.a.name}' and connection '${m.dst.name}' by agent '${m.b.name}': no agent serves both ends and relays are unavailable; let one agent serve both (agent_id or agent_pool)`);
    await updateAgent(plain, m.key, m.a.id, { labels: ['left'] });
    await updateAgent(plain, m.key, m.b.id, { labels: ['right'] });
    const left = await makeConnection(plain, m.key, 'sftp', { agent_pool: 'left' });
    const right = await makeConnection(plain, m.key, 's3', { agent_pool: 'right' });
    const pooled = await makeTransfer(plain, m.key, left.id, right.id);
    expectError(await transferAction(plain, m.key, pooled.id, 'execute'), 503,
      `Connection '${left.name}' is served by pool 'left' and connection '${right.name}' by pool 'right': no agent serves both ends and relays are unavailable; let one agent serve both (agent_id or agent_pool)`);
    m.a.client.close();
    m.b.client.close();
  });

  test('a relay that cannot start is taken over: the transfer waits again as the next attempt', async () => {
    const n = await twoNetworks(app);
    relays.failWith = 'no route to the source agent';
    try {
      const job = await makeTransfer(app, n.key, n.src.id, n.dst.id);
      await execute(app, n.key, job.id);
      const interrupted = await eventually(async () => {
        const j = await getTransfer(app, n.key, job.id);
        return j.takeovers === 1 && j;
      }, 'taken over');
      expect(interrupted.last_interruption).toMatchObject({ attempt: 1, agent_id: n.b.id, reason: 'The relay could not start: no route to the source agent' });
      await transferAction(app, n.key, job.id, 'cancel');
    } finally {
      relays.failWith = null;
      n.a.client.close();
      n.b.client.close();
    }
  });
});

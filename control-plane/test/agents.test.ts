import { Types } from 'mongoose';
import { AGENT_TOKEN_WARNING, CloseCodes, Messages } from '@xfer/shared';
import type { App } from '../src/app.js';
import { sha256Hex } from '../src/lib/crypto.js';
import { auth, buildTestApp, createAccount, createKey, expectError, type TestAccount } from './helper.js';
import { eventually, ProtocolClient } from './protocol-client.js';

let app: App;
let owner: TestAccount;
let stranger: TestAccount;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200, agentHelloTimeoutMs: 1000 });
  await app.listen({ host: '127.0.0.1', port: 0 });
  owner = await createAccount(app);
  stranger = await createAccount(app);
});
afterAll(() => app.close());

let seq = 0;
const uniqueName = () => `agent-${++seq}-${new Types.ObjectId()}`;

async function createAgent(body: Record<string, unknown> = {}, token = owner.apiKey) {
  const res = await app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth(token), payload: { name: uniqueName(), ...body } });
  if (res.statusCode !== 201) throw new Error(`create agent: ${res.statusCode} ${res.body}`);
  return res.json().data as { id: string; name: string; token: string };
}

const getAgent = (id: string, token = owner.apiKey) => app.inject({ method: 'GET', url: `/api/v1/agents/${id}`, headers: auth(token) });

const AGENT_FIELDS = [
  'agent_labels', 'agent_max_jobs', 'approved', 'approved_at', 'approved_by', 'connector_types', 'created_at', 'hostname', 'id', 'labels',
  'last_seen_at', 'max_jobs', 'name', 'pools', 'relay', 'running_jobs', 'slots', 'status', 'version',
];

describe('POST /agents', () => {
  test('creates an agent and shows its agt_ token once, stored only as its SHA-256', async () => {
    const name = uniqueName();
    const res = await app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth(owner.apiKey), payload: { name, labels: ['eu-west', 'dc=fra1'] } });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.warning).toBe(AGENT_TOKEN_WARNING);
    expect(Object.keys(body.data).sort()).toEqual([...AGENT_FIELDS, 'token'].sort());
    expect(body.data).toMatchObject({
      name, labels: ['eu-west', 'dc=fra1'], status: 'offline', last_seen_at: null, version: null, hostname: null,
      connector_types: [], running_jobs: [], agent_labels: [], pools: ['eu-west', 'dc=fra1'], max_jobs: null, agent_max_jobs: null,
      slots: { total: 0, running: 0, free: 0 }, relay: false,
    });
    expect(body.data.token).toMatch(/^agt_[A-Za-z0-9_-]{43}$/);

    const stored = await app.db.agents.findById(body.data.id).lean();
    expect(stored!.token_hash).toBe(sha256Hex(body.data.token));
    expect(JSON.stringify(stored)).not.toContain(body.data.token);

    for (const url of ['/api/v1/agents', `/api/v1/agents/${body.data.id}`, '/api/v1/activity']) {
      const read = await app.inject({ method: 'GET', url, headers: auth(owner.apiKey) });
      expect(read.statusCode).toBe(200);
      expect(read.body).not.toContain(body.data.token);
    }
    const audit = await app.db.auditEvents.findOne({ action: 'agent.create', 'resource.id': body.data.id }).lean();
    expect(audit).toMatchObject({ outcome: 'success', details: { name } });
  });

  test('names are unique per account (409), not across accounts', async () => {
    const { name } = await createAgent();
    const again = await app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth(owner.apiKey), payload: { name } });
    expectError(again, 409, `An agent named '${name}' already exists`);
    const other = await app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth(stranger.apiKey), payload: { name } });
    expect(other.statusCode).toBe(201);
  });

  test.each([
    [{}, /body\.name is required/],
    [{ name: '' }, /body\.name must not be empty/],
    [{ name: 'x', labels: 'a' }, /body\.labels must be array/],
    [{ name: 'x', labels: ['has space'] }, /body\.labels\.0 has an invalid format/],
    [{ name: 'x', token: 'agt_mine' }, /unknown field 'token'/],
  ])('refuses %j with 400 naming the field', async (payload, message) => {
    expectError(await app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth(owner.apiKey), payload }), 400, message);
  });

  test('needs agents:write; agents:read only reads', async () => {
    const reader = await createKey(app, owner.apiKey, ['agents:read']);
    expectError(await app.inject({ method: 'POST', url: '/api/v1/agents', headers: auth(reader), payload: { name: 'x' } }), 403, Messages.missingScope);
    expect((await app.inject({ method: 'GET', url: '/api/v1/agents', headers: auth(reader) })).statusCode).toBe(200);
  });
});

describe('GET /agents', () => {
  test('lists the account\'s agents newest first with cursor paging, never another account\'s', async () => {
    const account = await createAccount(app);
    const created = [];
    for (let i = 0; i < 3; i++) created.push(await createAgent({}, account.apiKey));
    await createAgent({}, stranger.apiKey);
    const first = await app.inject({ method: 'GET', url: '/api/v1/agents?limit=2', headers: auth(account.apiKey) });
    expect(first.statusCode).toBe(200);
    expect(first.json().data.map((a: { id: string }) => a.id)).toEqual([created[2]!.id, created[1]!.id]);
    const cursor = first.json().next_cursor;
    const second = await app.inject({ method: 'GET', url: `/api/v1/agents?limit=2&cursor=${cursor}`, headers: auth(account.apiKey) });
    expect(second.json()).toEqual({ data: [expect.objectContaining({ id: created[0]!.id })], next_cursor: null });
    expectError(await app.inject({ method: 'GET', url: '/api/v1/agents?colour=red', headers: auth(account.apiKey) }), 400, /unknown field 'colour'/);
  });

  test('another account\'s agent and malformed ids are 404', async () => {
    const agent = await createAgent();
    expectError(await getAgent(agent.id, stranger.apiKey), 404, `Agent ${agent.id} not found`);
    expectError(await getAgent('not-an-id'), 404);
  });
});

describe('GET /api/v1/agents/connect', () => {
  test('a session: hello is answered with welcome; the agent shows online with what it said', async () => {
    const agent = await createAgent();
    const { client, welcome } = await ProtocolClient.connect(app, agent.token, { version: '1.2.3', hostname: 'edge-1', connector_types: ['sftp', 's3'] });
    expect(welcome).toEqual({ agent_id: agent.id, heartbeat_ms: 200, lease_ms: app.config.jobLeaseMs, abort_jobs: [], verified_lookup: true });
    const res = await getAgent(agent.id);
    expect(res.json().data).toMatchObject({ status: 'online', version: '1.2.3', hostname: 'edge-1', connector_types: ['sftp', 's3'], running_jobs: [] });
    expect(res.json().data.last_seen_at).not.toBeNull();
    const stored = await app.db.agents.findById(agent.id).lean();
    expect(stored!.session).toMatchObject({ instance_id: app.agentHub.instanceId });

    client.close();
    await client.closed;
    await eventually(async () => (await getAgent(agent.id)).json().data.status === 'offline', 'agent offline after disconnect');
    // The disconnect is audited right after the session is cleared (the agent shows offline in
    // between): wait for the record rather than read in that gap.
    const actions = async () => (await app.db.auditEvents.find({ 'resource.id': agent.id }).lean()).map((e) => e.action);
    await eventually(async () => (await actions()).includes('agent.disconnect'), 'agent.disconnect audited');
    expect(await actions()).toEqual(expect.arrayContaining(['agent.create', 'agent.connect', 'agent.disconnect']));
  });

  test('a wrong, missing or revoked token never gets a session: closed with revoked (4401), no frame', async () => {
    const agent = await createAgent();
    const wrong = `agt_${'A'.repeat(43)}`;
    for (const token of [wrong, null, owner.apiKey]) {
      const client = await ProtocolClient.open(app, token);
      client.send('hello', { version: '1', hostname: 'h', connector_types: [], running_jobs: [], max_jobs: 1 });
      expect(await client.closed).toEqual({ code: CloseCodes.revoked, reason: Messages.unauthenticated });
      expect(client.received).toEqual([]);
    }
    expect((await getAgent(agent.id)).json().data.status).toBe('offline');
    await app.authDenials.flush();
    const denials = await app.db.auditEvents.find({ action: 'agent.connect', outcome: 'denied' }).lean();
    expect(denials.reduce((sum, d) => sum + Number((d.details as { count?: number } | null)?.count ?? 0), 0)).toBeGreaterThanOrEqual(3);
    const logged = JSON.stringify(await app.db.auditEvents.find({ action: 'agent.connect' }).lean());
    expect(logged).not.toContain(wrong);
  });

  test('a plain GET without upgrade is 426', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/agents/connect' });
    expectError(res, 426, /WebSocket/);
  });

  test.each<[string, string | Buffer]>([
    ['not JSON', 'hello there'],
    ['wrong envelope', JSON.stringify({ type: 'hello', payload: {} })],
    ['unknown type', JSON.stringify({ v: 1, type: 'job.steal', id: '1', payload: {} })],
    ['invalid hello payload', JSON.stringify({ v: 1, type: 'hello', id: '1', payload: { version: 1 } })],
    ['a message before hello', JSON.stringify({ v: 1, type: 'pong', id: '1', payload: { request_id: 'x' } })],
    ...['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'].map((type): [string, string] => [`type "${type}" (an Object.prototype name)`, JSON.stringify({ v: 1, type, id: 'x', payload: {} })]),
    ['text that is not UTF-8', Buffer.concat([Buffer.from('{"v":1,"type":"hello","id":"1","payload":{"version":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}}')])],
  ])('%s closes the socket with protocolError (4400)', async (_what, raw) => {
    const agent = await createAgent();
    const client = await ProtocolClient.open(app, agent.token);
    client.sendRaw(raw);
    expect((await client.closed).code).toBe(CloseCodes.protocolError);
    expect(client.received).toEqual([]);
  });

  test('a binary frame, or a second hello, after welcome closes with protocolError', async () => {
    for (const send of [(c: ProtocolClient) => c.sendRaw(Buffer.from([1, 2, 3]), true), (c: ProtocolClient) => c.send('hello', { version: '1', hostname: 'h', connector_types: [], running_jobs: [], max_jobs: 1 })]) {
      const agent = await createAgent();
      const { client } = await ProtocolClient.connect(app, agent.token);
      send(client);
      expect((await client.closed).code).toBe(CloseCodes.protocolError);
    }
  });

  test('another protocol version closes with unsupportedVersion (4426)', async () => {
    const agent = await createAgent();
    const client = await ProtocolClient.open(app, agent.token);
    client.sendRaw(JSON.stringify({ v: 2, type: 'hello', id: '1', payload: {} }));
    expect((await client.closed).code).toBe(CloseCodes.unsupportedVersion);
  });

  test('no hello in time closes with protocolError', async () => {
    const agent = await createAgent();
    const client = await ProtocolClient.open(app, agent.token);
    expect(await client.closed).toEqual({ code: CloseCodes.protocolError, reason: 'expected hello within 1000 ms' });
  });

  test('a second session of the same agent replaces the first (closed with replaced, 4409)', async () => {
    const agent = await createAgent();
    const first = await ProtocolClient.connect(app, agent.token);
    const second = await ProtocolClient.connect(app, agent.token, { hostname: 'second' });
    expect((await first.client.closed).code).toBe(CloseCodes.replaced);
    const stored = await app.db.agents.findById(agent.id).lean();
    expect(stored!.hostname).toBe('second');
    expect((await getAgent(agent.id)).json().data.status).toBe('online');
    second.client.close();
  });

  test('a session whose socket stops answering pings is dropped', async () => {
    const agent = await createAgent();
    // No automatic pong replies: to the server the agent is silent after its hello.
    const client = await ProtocolClient.open(app, agent.token, { autoPong: false });
    await client.hello();
    expect((await client.closed).code).toBe(1006);
    await eventually(async () => (await getAgent(agent.id)).json().data.status === 'offline', 'silent agent offline');
  });
});

describe('DELETE /agents/:id', () => {
  test('revokes at once: the open socket is closed with revoked, the token stops working, the record is gone', async () => {
    const agent = await createAgent();
    const { client } = await ProtocolClient.connect(app, agent.token);
    const res = await app.inject({ method: 'DELETE', url: `/api/v1/agents/${agent.id}`, headers: auth(owner.apiKey) });
    expect(res.json()).toEqual({ data: { id: agent.id, deleted: true } });
    expect((await client.closed).code).toBe(CloseCodes.revoked);

    const again = await ProtocolClient.open(app, agent.token);
    expect((await again.closed).code).toBe(CloseCodes.revoked);
    expectError(await getAgent(agent.id), 404);
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/agents/${agent.id}`, headers: auth(owner.apiKey) }), 404);
    const audit = await app.db.auditEvents.findOne({ action: 'agent.revoke', 'resource.id': agent.id }).lean();
    expect(audit).toMatchObject({ outcome: 'success' });
    expect(JSON.stringify(audit)).not.toContain(agent.token);
  });

  test("another account's agent is 404 and stays", async () => {
    const agent = await createAgent();
    expectError(await app.inject({ method: 'DELETE', url: `/api/v1/agents/${agent.id}`, headers: auth(stranger.apiKey) }), 404);
    expect((await getAgent(agent.id)).statusCode).toBe(200);
  });
});

describe('POST /agents/:id/test', () => {
  test('round-trips a ping through the agent', async () => {
    const agent = await createAgent();
    const { client } = await ProtocolClient.connect(app, agent.token);
    const pending = app.inject({ method: 'POST', url: `/api/v1/agents/${agent.id}/test`, headers: auth(owner.apiKey) });
    const ping = await client.next('ping');
    client.send('pong', { request_id: ping.payload.request_id });
    const res = await pending;
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toEqual({ success: true, message: expect.stringContaining(agent.name), latency_ms: expect.any(Number) });
    expect(await app.db.agentRequests.countDocuments({ agent_id: new Types.ObjectId(agent.id) })).toBe(0);
    client.close();
  });

  test('an offline agent is 503', async () => {
    const agent = await createAgent();
    expectError(await app.inject({ method: 'POST', url: `/api/v1/agents/${agent.id}/test`, headers: auth(owner.apiKey) }), 503, `Agent '${agent.name}' is offline`);
  });

  test('an agent that disconnects before answering gives success false', async () => {
    const agent = await createAgent();
    const { client } = await ProtocolClient.connect(app, agent.token);
    const pending = app.inject({ method: 'POST', url: `/api/v1/agents/${agent.id}/test`, headers: auth(owner.apiKey) });
    await client.next('ping');
    client.close();
    const res = await pending;
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ success: false, message: expect.stringMatching(/disconnected before answering/) });
  });
});

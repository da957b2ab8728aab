import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, expectError, type TestAccount } from './helper.js';
import { makeAgent, makeConnection, SECRET } from './fixtures.js';
import { ProtocolClient } from './protocol-client.js';

/** POST /connections/:id/test: the check runs on the agent serving the connection. */
let app: App;
let owner: TestAccount;

beforeAll(async () => {
  // A 1 s heartbeat: the protocol client answers pings from the test's event loop, and at 200 ms a
  // stall of 0.6 s on the loaded machine dropped its session mid-request.
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 1000 });
  await app.listen({ host: '127.0.0.1', port: 0 });
  owner = await createAccount(app);
});
afterAll(() => app.close());

const testConnection = (id: string, key = owner.apiKey) =>
  app.inject({ method: 'POST', url: `/api/v1/connections/${id}/test`, headers: auth(key) });

test('no agent online: 503 naming the connection', async () => {
  const conn = await makeConnection(app, owner.apiKey, 'webdav');
  expectError(await testConnection(conn.id), 503, `No online agent can serve connection '${conn.name}' (needs webdav connector)`);
});

test('the agent gets the decrypted settings and its answer is returned, success or not (200 both)', async () => {
  const agent = await makeAgent(app, owner.apiKey);
  const { client } = await ProtocolClient.connect(app, agent.token, { connector_types: ['sftp'] });
  const conn = await makeConnection(app, owner.apiKey, 'sftp', { agent_id: agent.id });
  for (const answer of [{ success: true, message: 'listed / (3 entries)', latency_ms: 8.5 }, { success: false, message: 'host key mismatch', latency_ms: 3 }]) {
    const pending = testConnection(conn.id);
    const request = await client.next('connection.test');
    expect(request.payload.connection).toMatchObject({ id: conn.id, type: 'sftp', host: 'sftp.example.test', port: 22, credentials: { username: 'u', password: SECRET } });
    client.send('connection.test.result', { request_id: request.payload.request_id, ...answer });
    const res = await pending;
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ data: answer });
    expect(res.body).not.toContain(SECRET);
  }
  const audit = await app.db.auditEvents.find({ action: 'connection.test', 'resource.id': conn.id }).lean();
  expect(audit.map((e) => e.outcome)).toEqual(['success', 'failure']);
  expect(JSON.stringify(audit)).not.toContain(SECRET);
  client.close();
});

test("another account's connection is 404; needs connections:write", async () => {
  const stranger = await createAccount(app);
  const conn = await makeConnection(app, owner.apiKey, 'sftp');
  expectError(await testConnection(conn.id, stranger.apiKey), 404, `Connection ${conn.id} not found`);
});

test('an answer to somebody else\'s request, or of the wrong kind, is ignored', async () => {
  const agent = await makeAgent(app, owner.apiKey);
  const { client } = await ProtocolClient.connect(app, agent.token, { connector_types: ['sftp'] });
  const conn = await makeConnection(app, owner.apiKey, 'sftp', { agent_id: agent.id });
  const pending = testConnection(conn.id);
  const request = await client.next('connection.test');
  client.send('pong', { request_id: request.payload.request_id });
  client.send('connection.test.result', { request_id: 'not-a-request', success: true, message: 'forged', latency_ms: 1 });
  client.send('connection.test.result', { request_id: request.payload.request_id, success: true, message: 'ok', latency_ms: 2 });
  expect((await pending).json().data).toEqual({ success: true, message: 'ok', latency_ms: 2 });
  client.close();
});

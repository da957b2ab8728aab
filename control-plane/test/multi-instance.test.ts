import { CloseCodes } from '@xfer/shared';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, type TestAccount } from './helper.js';
import { counters, getTransfer, makeAgent, makeConnection, makeTransfer, SECRET, transferAction } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/**
 * Two control-plane instances on one database: agents connect to B, the API is called on A.
 * Nothing but the database connects them.
 */
let a: App;
let b: App;
let account: TestAccount;

beforeAll(async () => {
  const settings = { dispatchPollMs: 50, agentHeartbeatMs: 200, jobLeaseMs: 3_000, agentRequestTimeoutMs: 1_500 };
  a = await buildTestApp(settings);
  b = await buildTestApp({ ...settings, databaseName: a.config.databaseName, masterKeys: a.config.masterKeys });
  await b.listen({ host: '127.0.0.1', port: 0 });
  account = await createAccount(a);
});
let bClosed = false;
afterAll(async () => {
  if (!bClosed) await b.close();
  await a.close();
});

async function agentOnB(connectorTypes: Array<'sftp' | 's3'> = ['sftp', 's3']) {
  const agent = await makeAgent(a, account.apiKey);
  const { client } = await ProtocolClient.connect(b, agent.token, { connector_types: connectorTypes });
  return { agent, client };
}

test('the instances are distinct', () => {
  expect(a.agentHub.instanceId).not.toBe(b.agentHub.instanceId);
});

test('A sees an agent connected to B as online; execute on A runs the job through B; the blocking execute on A answers', async () => {
  const { agent, client } = await agentOnB();
  const agentView = (await a.inject({ method: 'GET', url: `/api/v1/agents/${agent.id}`, headers: auth(account.apiKey) })).json().data;
  expect(agentView.status).toBe('online');

  // Pinned, so that no other test's agent (still closing) can be chosen.
  const src = await makeConnection(a, account.apiKey, 'sftp', { agent_id: agent.id });
  const dst = await makeConnection(a, account.apiKey, 's3', { agent_id: agent.id });
  const job = await makeTransfer(a, account.apiKey, src.id, dst.id);
  const pending = transferAction(a, account.apiKey, job.id, 'execute');
  const assign = await client.next('job.assign');
  expect(assign.payload).toMatchObject({ job_id: job.id, source: { credentials: { password: SECRET } } });
  expect((await b.db.transfers.findById(job.id).lean())!.lease!.instance_id).toBe(b.agentHub.instanceId);
  client.send('job.accepted', { job_id: job.id });
  client.send('job.progress', { job_id: job.id, ...counters(2, 1, 10), listing_done: true, files: [] });
  client.send('job.completed', { job_id: job.id, ...counters(2, 2, 20) });
  expect((await pending).json()).toEqual({ success: true, files_transferred: 2, bytes_transferred: 20 });
  client.close();
});

test('cancel on A reaches the agent on B', async () => {
  const { agent, client } = await agentOnB();
  // Pinned, so that no other test's agent (still closing) can be chosen.
  const src = await makeConnection(a, account.apiKey, 'sftp', { agent_id: agent.id });
  const dst = await makeConnection(a, account.apiKey, 's3', { agent_id: agent.id });
  const job = await makeTransfer(a, account.apiKey, src.id, dst.id);
  await transferAction(a, account.apiKey, job.id, 'execute', '?wait=false');
  await client.next('job.assign');
  client.send('job.accepted', { job_id: job.id });
  // The cancel goes in once B has written the acceptance: on FerretDB, two instances' writes to one
  // transfer may still cross and one be lost (docs/architecture.md "FerretDB and atomic updates").
  await eventually(async () => (await a.db.transfers.findById(job.id).lean())?.accepted_at, 'B wrote the acceptance');
  expect((await transferAction(a, account.apiKey, job.id, 'cancel')).json().data.status).toBe('cancelled');
  expect((await client.next('job.cancel')).payload.job_id).toBe(job.id);
  client.close();
});

test('revoking on A closes the socket on B with revoked', async () => {
  const { agent, client } = await agentOnB();
  await a.inject({ method: 'DELETE', url: `/api/v1/agents/${agent.id}`, headers: auth(account.apiKey) });
  expect((await client.closed).code).toBe(CloseCodes.revoked);
});

test('a newer session on A replaces the one on B', async () => {
  await a.listen({ host: '127.0.0.1', port: 0 });
  const { agent, client: onB } = await agentOnB();
  const { client: onA } = await ProtocolClient.connect(a, agent.token);
  expect((await onB.closed).code).toBe(CloseCodes.replaced);
  expect((await a.db.agents.findById(agent.id).lean())!.session!.instance_id).toBe(a.agentHub.instanceId);
  onA.close();
});

test('ping and connection test from A round-trip through the agent on B', async () => {
  const { agent, client } = await agentOnB();
  const ping = a.inject({ method: 'POST', url: `/api/v1/agents/${agent.id}/test`, headers: auth(account.apiKey) });
  client.send('pong', { request_id: (await client.next('ping')).payload.request_id });
  expect((await ping).json().data).toMatchObject({ success: true });

  const conn = await makeConnection(a, account.apiKey, 'sftp', { agent_id: agent.id });
  const test = a.inject({ method: 'POST', url: `/api/v1/connections/${conn.id}/test`, headers: auth(account.apiKey) });
  const request = await client.next('connection.test');
  expect(request.payload.connection).toMatchObject({ id: conn.id, credentials: { password: SECRET } });
  client.send('connection.test.result', { request_id: request.payload.request_id, success: false, message: 'authentication failed', latency_ms: 12 });
  expect((await test).json()).toEqual({ data: { success: false, message: 'authentication failed', latency_ms: 12 } });
  // Answered requests are removed; credentials were never written to the requests collection.
  expect(await a.db.agentRequests.countDocuments({})).toBe(0);
  client.close();
});

test('a connection test the agent never answers: success false after the timeout', async () => {
  const { agent, client } = await agentOnB(['sftp']);
  const conn = await makeConnection(a, account.apiKey, 'sftp', { agent_id: agent.id });
  const res = a.inject({ method: 'POST', url: `/api/v1/connections/${conn.id}/test`, headers: auth(account.apiKey) });
  await client.next('connection.test');
  expect((await res).json().data).toMatchObject({ success: false, message: 'agent did not answer within 2 s' });
  client.close();
});

test('shutting B down closes its agent sockets with goingAway; running jobs keep their leases', async () => {
  const { agent, client } = await agentOnB();
  // Pinned, so that no other test's agent (still closing) can be chosen.
  const src = await makeConnection(a, account.apiKey, 'sftp', { agent_id: agent.id });
  const dst = await makeConnection(a, account.apiKey, 's3', { agent_id: agent.id });
  const job = await makeTransfer(a, account.apiKey, src.id, dst.id);
  await transferAction(a, account.apiKey, job.id, 'execute', '?wait=false');
  await client.next('job.assign');
  client.send('job.accepted', { job_id: job.id });
  await eventually(async () => (await a.db.transfers.findById(job.id).lean())?.accepted_at, 'accepted');
  const before = (await a.db.transfers.findById(job.id).lean())!.lease!;
  const other = await makeTransfer(a, account.apiKey, src.id, dst.id);
  const waiting = transferAction(b, account.apiKey, other.id, 'execute');
  await client.next('job.assign');

  bClosed = true;
  await b.close();
  expect((await client.closed).code).toBe(CloseCodes.goingAway);
  const answer = await waiting;
  expect(answer.statusCode).toBe(503);
  expect(answer.json()).toEqual({ error: `The server is shutting down; transfer ${other.id} carries on: follow it with GET /transfers/${other.id}` });
  const after = await a.db.transfers.findById(job.id).lean();
  expect(after).toMatchObject({ status: 'in-progress' });
  expect(after!.lease!.expires_at.getTime()).toBeGreaterThanOrEqual(before.expires_at.getTime());
  expect((await getTransfer(a, account.apiKey, job.id)).status).toBe('in-progress');
});

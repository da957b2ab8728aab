import { createHash, randomBytes } from 'node:crypto';
import type { App } from '../src/app.js';
import type { Sealed } from '../src/lib/vault.js';
import { auth, buildTestApp, createAccount, type TestAccount } from './helper.js';
import { makeAgent, makeConnection, uniqueName } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';
import { boundTo } from '../src/lib/sealed-fields.js';

/**
 * `connection.credentials`: an agent reports a refresh token the service rotated, and the
 * control plane stores it sealed in the connection — only for its account's connections, only
 * the fields the type rotates, never over a value someone stored meanwhile.
 */
let app: App;
let owner: TestAccount;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200 });
  await app.listen({ host: '127.0.0.1', port: 0 });
  owner = await createAccount(app);
});
afterAll(() => app.close());

const token = (label: string) => `${label}-${randomBytes(24).toString('base64url')}`;
const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

async function onedrive(apiKey: string, refreshToken: string, extra: Record<string, unknown> = {}) {
  const res = await app.inject({
    method: 'POST', url: '/api/v1/connections', headers: auth(apiKey),
    payload: {
      name: uniqueName('onedrive'), type: 'onedrive', path: '/in',
      credentials: { client_id: 'app-id', client_secret: 'the-client-secret', tenant_id: 'tenant', refresh_token: refreshToken }, ...extra,
    },
  });
  expect(res.statusCode).toBe(201);
  return res.json().data as { id: string };
}

/** The connection's credentials, decrypted from the database. */
async function storedCredentials(id: string): Promise<Record<string, unknown>> {
  const doc = await app.db.connections.findById(id).lean();
  return app.vault.open<Record<string, unknown>>(doc!.credentials as Sealed, boundTo('connection.credentials', doc!));
}

/** Waits for the audit record of the n-th report about connection `id` (reports are handled in order). */
async function reported(id: string, n: number) {
  return eventually(async () => {
    const events = await app.db.auditEvents.find({ action: 'connection.credentials.rotate', 'resource.id': id }).sort({ _id: 1 }).lean();
    return events[n - 1];
  }, `audit record #${n} for ${id}`);
}

test('a rotated refresh token is stored sealed, merged with the other fields; reads never return it', async () => {
  const first = token('rt1');
  const conn = await onedrive(owner.apiKey, first);
  const agent = await makeAgent(app, owner.apiKey);
  const { client } = await ProtocolClient.connect(app, agent.token, { connector_types: ['onedrive'] });
  const rotated = token('rt2');
  client.send('connection.credentials', { connection_id: conn.id, credentials: { refresh_token: rotated }, previous_sha256: { refresh_token: sha256(first) } });
  const event = await reported(conn.id, 1);
  expect(event).toMatchObject({ outcome: 'success', actor: { type: 'agent', id: agent.id }, details: { fields: ['refresh_token'], result: 'stored' } });
  // Recorded write-ahead: the record can be seen a moment before the stored value.
  await eventually(async () => (await storedCredentials(conn.id)).refresh_token === rotated, 'the rotated token stored');
  expect(await storedCredentials(conn.id)).toEqual({ client_id: 'app-id', client_secret: 'the-client-secret', tenant_id: 'tenant', refresh_token: rotated });
  const raw = await app.db.connections.findById(conn.id).lean();
  expect(JSON.stringify(raw)).not.toContain(rotated);
  const read = await app.inject({ method: 'GET', url: `/api/v1/connections/${conn.id}`, headers: auth(owner.apiKey) });
  expect(read.statusCode).toBe(200);
  expect(read.json().data.has_credentials).toBe(true);
  expect(read.body).not.toContain(rotated);
  expect(JSON.stringify(event)).not.toContain(rotated);
  // The next rotation chains on the stored one; the same value again changes nothing.
  const third = token('rt3');
  client.send('connection.credentials', { connection_id: conn.id, credentials: { refresh_token: third }, previous_sha256: { refresh_token: sha256(rotated) } });
  client.send('connection.credentials', { connection_id: conn.id, credentials: { refresh_token: third }, previous_sha256: { refresh_token: sha256(rotated) } });
  expect((await reported(conn.id, 2)).details).toMatchObject({ result: 'stored' });
  expect((await reported(conn.id, 3)).details).toMatchObject({ result: 'unchanged' });
  expect((await storedCredentials(conn.id)).refresh_token).toBe(third);
  client.close();
});

test("a token someone stored meanwhile wins over the agent's rotation of the old one", async () => {
  const first = token('rt1');
  const conn = await onedrive(owner.apiKey, first);
  const edited = token('edited');
  const put = await app.inject({
    method: 'PUT', url: `/api/v1/connections/${conn.id}`, headers: auth(owner.apiKey),
    payload: { credentials: { client_id: 'app-id', client_secret: 'the-client-secret', tenant_id: 'tenant', refresh_token: edited } },
  });
  expect(put.statusCode).toBe(200);
  const agent = await makeAgent(app, owner.apiKey);
  const { client } = await ProtocolClient.connect(app, agent.token, { connector_types: ['onedrive'] });
  client.send('connection.credentials', { connection_id: conn.id, credentials: { refresh_token: token('late') }, previous_sha256: { refresh_token: sha256(first) } });
  expect((await reported(conn.id, 1)).details).toMatchObject({ result: 'superseded' });
  expect((await storedCredentials(conn.id)).refresh_token).toBe(edited);
  client.close();
});

test("refused: another account's connection, another agent's, other fields, other types; the session stays open", async () => {
  const stranger = await createAccount(app);
  const first = token('rt1');
  const theirs = await onedrive(stranger.apiKey, first);
  const agent = await makeAgent(app, owner.apiKey);
  const otherAgent = await makeAgent(app, owner.apiKey);
  const pinned = await onedrive(owner.apiKey, first, { agent_id: otherAgent.id });
  const ours = await onedrive(owner.apiKey, first);
  const sftp = await makeConnection(app, owner.apiKey, 'sftp');
  // It has the sftp connector, so it serves the sftp connection: what it may not do there is replace a field sftp does not rotate.
  const { client } = await ProtocolClient.connect(app, agent.token, { connector_types: ['onedrive', 'sftp'] });
  const forged = token('forged');
  const previous = { refresh_token: sha256(first) };
  client.send('connection.credentials', { connection_id: theirs.id, credentials: { refresh_token: forged }, previous_sha256: previous });
  client.send('connection.credentials', { connection_id: pinned.id, credentials: { refresh_token: forged }, previous_sha256: previous });
  client.send('connection.credentials', { connection_id: ours.id, credentials: { client_secret: forged }, previous_sha256: { client_secret: sha256('the-client-secret') } });
  client.send('connection.credentials', { connection_id: ours.id, credentials: { refresh_token: forged, client_id: 'other-app' }, previous_sha256: previous });
  client.send('connection.credentials', { connection_id: sftp.id, credentials: { refresh_token: forged }, previous_sha256: previous });
  expect(await reported(theirs.id, 1)).toMatchObject({ outcome: 'failure', details: { reason: `Connection ${theirs.id} not found` } });
  expect(await reported(pinned.id, 1)).toMatchObject({ outcome: 'failure', details: { reason: `Connection ${pinned.id} not found` } });
  expect(await reported(ours.id, 1)).toMatchObject({ outcome: 'failure', details: { reason: 'credentials.client_secret cannot be replaced by an agent for onedrive connections' } });
  expect(await reported(ours.id, 2)).toMatchObject({ outcome: 'failure', details: { reason: 'credentials.client_id cannot be replaced by an agent for onedrive connections' } });
  expect(await reported(sftp.id, 1)).toMatchObject({ outcome: 'failure', details: { reason: 'credentials.refresh_token cannot be replaced by an agent for sftp connections' } });
  expect((await storedCredentials(theirs.id)).refresh_token).toBe(first);
  expect((await storedCredentials(pinned.id)).refresh_token).toBe(first);
  expect(await storedCredentials(ours.id)).toEqual({ client_id: 'app-id', client_secret: 'the-client-secret', tenant_id: 'tenant', refresh_token: first });
  // Still open: a valid report afterwards is stored.
  const rotated = token('rt2');
  client.send('connection.credentials', { connection_id: ours.id, credentials: { refresh_token: rotated }, previous_sha256: previous });
  expect((await reported(ours.id, 3)).details).toMatchObject({ result: 'stored' });
  await eventually(async () => (await storedCredentials(ours.id)).refresh_token === rotated, 'the rotated token stored');
  const audit = await app.db.auditEvents.find({ action: 'connection.credentials.rotate' }).lean();
  expect(JSON.stringify(audit)).not.toContain(forged);
  client.close();
});

test("re-pointing a connection at the caller's own agent without credentials is refused: its tests keep going to the agent they were given for", async () => {
  const trusted = await makeAgent(app, owner.apiKey);
  const rogue = await makeAgent(app, owner.apiKey);
  const conn = await makeConnection(app, owner.apiKey, 'sftp', { agent_id: trusted.id });
  const { client: good } = await ProtocolClient.connect(app, trusted.token, { connector_types: ['sftp'] });
  const { client: bad } = await ProtocolClient.connect(app, rogue.token, { connector_types: ['sftp'] });
  const moved = await app.inject({ method: 'PUT', url: `/api/v1/connections/${conn.id}`, headers: auth(owner.apiKey), payload: { agent_id: rogue.id } });
  expect(moved.statusCode).toBe(400);
  expect(moved.json().error).toMatch(/^agent_id cannot change without credentials/);
  const test = app.inject({ method: 'POST', url: `/api/v1/connections/${conn.id}/test`, headers: auth(owner.apiKey) });
  const request = await good.next('connection.test');
  expect(request.payload.connection.credentials).toMatchObject({ username: expect.any(String) });
  good.send('connection.test.result', { request_id: request.payload.request_id, success: true, message: 'ok', latency_ms: 1 });
  expect((await test).statusCode).toBe(200);
  expect(bad.all('connection.test')).toEqual([]);
  good.close();
  bad.close();
});

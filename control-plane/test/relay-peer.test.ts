import { jest } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { RELAY_CHUNK_BYTES, RELAY_FRAME_HEADER_BYTES, RELAY_WINDOW_BYTES } from '@xfer/shared';
import type { App } from '../src/app.js';
import { signPeerToken, type PeerLinkClaims } from '../src/lib/peer-token.js';
import { LINK_KEY_PURPOSE, LINK_PATH } from '../src/plugins/app/relay/index.js';
import type { StoredTransfer } from '../src/plugins/app/transfers/index.js';
import { buildTestApp, createAccount, type TestAccount } from './helper.js';
import { makeConnection, makeTransfer, SECRET, transferAction } from './fixtures.js';
import { FakeNetwork } from './fake-network.js';
import { eventually, type ProtocolClient } from './protocol-client.js';
import { assignRelay, entries, frames, FULL_CREDIT, ref, relayAgent, relayedTransfer, takenOverOnce, type RelayAgent } from './relay-fixtures.js';

/**
 * Relays across two control-plane instances on one database (docs/architecture.md "Relays"):
 * the destination agent's socket on A (which hosts the relay), the source agent's on B. A reaches
 * B at B's advertised URL (`XFER_INSTANCE_URL`), here a fake network in front of B that records
 * what crosses it and can be cut.
 */
let a: App;
let b: App;
let network: FakeNetwork;
let owner: TestAccount;
const logs: string[] = [];

beforeAll(async () => {
  const settings = { dispatchPollMs: 50, agentHeartbeatMs: 1_000, jobLeaseMs: 3_000 };
  network = await FakeNetwork.start();
  a = await buildTestApp(settings, { logs });
  await a.listen({ host: '127.0.0.1', port: 0 });
  b = await buildTestApp({ ...settings, databaseName: a.config.databaseName, masterKeys: a.config.masterKeys, instanceUrl: `http://127.0.0.1:${network.port}` }, { logs });
  await b.listen({ host: '127.0.0.1', port: 0 });
  network.target = (b.server.address() as { port: number }).port;
  owner = await createAccount(a);
});
let bClosed = false;
afterAll(async () => {
  if (!bClosed) await b.close();
  await a.close();
  await network.close();
});

const opened: ProtocolClient[] = [];
afterEach(() => {
  for (const c of opened.splice(0)) c.close();
  jest.restoreAllMocks();
});

async function agentOn(app: App): Promise<RelayAgent> {
  const agent = await relayAgent(app, a, owner.apiKey);
  opened.push(agent.client);
  return agent;
}

/** Destination agent on A, source agent on B, the relay started on A: the source has its `relay.source` from B. */
async function acrossInstances() {
  const destination = await agentOn(a);
  const source = await agentOn(b);
  const job = await relayedTransfer(a, owner.apiKey, destination, source);
  await assignRelay(a, job);
  const relaySource = await source.client.next('relay.source');
  return { destination, source, job, relaySource };
}

const failCalls = (spy: { mock: { calls: unknown[][] } }, job: StoredTransfer) => spy.mock.calls.filter((c) => String(c[0]) === String(job._id));

test('each instance records its own advertised URL with the sessions it holds', async () => {
  const onA = await agentOn(a);
  const onB = await agentOn(b);
  const session = async (id: string) => (await a.db.agents.findById(id).lean())!.session!;
  expect(await session(onA.id)).toMatchObject({ instance_id: a.agentHub.instanceId, instance_url: `http://127.0.0.1:${(a.server.address() as { port: number }).port}` });
  expect(await session(onB.id)).toMatchObject({ instance_id: b.agentHub.instanceId, instance_url: `http://127.0.0.1:${network.port}` });
});

test('over a peer link: B sends relay.source, frames go through byte-exact both ways; credentials never cross, the token is never logged', async () => {
  const crossedBefore = network.seen.length;
  const { destination, source, job, relaySource } = await acrossInstances();
  expect(relaySource.payload).toMatchObject({ ...ref(job), source_path: '/in', source: { credentials: { password: SECRET } } });
  expect(a.relays.stats()).toMatchObject({ hosted: 1, served: 0 });
  expect(b.relays.stats()).toMatchObject({ hosted: 0, served: 1 });

  destination.client.send('relay.credit', { ...ref(job), ...FULL_CREDIT });
  expect((await source.client.next('relay.credit')).payload).toEqual({ ...ref(job), ...FULL_CREDIT });
  const listing = entries(50, 'dir/file');
  source.client.send('relay.entries', { ...ref(job), entries: listing, done: true });
  expect((await destination.client.next('relay.entries')).payload).toEqual({ ...ref(job), entries: listing, done: true });
  destination.client.send('relay.want', { ...ref(job), files: [{ path: 'dir/file-1', size: 100 }] });
  expect((await source.client.next('relay.want')).payload).toEqual({ ...ref(job), files: [{ path: 'dir/file-1', size: 100 }] });

  const sent = frames(job, [RELAY_CHUNK_BYTES, 7, RELAY_CHUNK_BYTES, 0, 12_345, ...Array.from({ length: 20 }, () => RELAY_CHUNK_BYTES)]);
  for (const f of sent) await source.client.sendBinary(f);
  const got = await destination.client.binaryFrames(sent.length);
  expect(got.length).toBe(sent.length);
  got.forEach((f, i) => expect(f.equals(sent[i]!)).toBe(true));

  // What the source vouches for crosses the link unchanged and is recorded by the host (A), not given to the destination.
  const vouched = [{ path: 'dir/file-1', size: 100, sha256: 'ab'.repeat(32) }];
  source.client.send('relay.sent', { ...ref(job), files: vouched });
  const recorded = await eventually(async () => a.db.relaySentFiles.find({ job_id: job._id }, { _id: 0, attempt: 1, path: 1, size: 1, sha256: 1 }).lean().then((d) => d.length > 0 && d), 'the host recorded it');
  expect(recorded).toEqual([{ attempt: 1, ...vouched[0] }]);
  expect(Buffer.concat(network.seen.slice(crossedBefore)).toString('latin1')).toContain('"relay.sent"');
  expect(destination.client.received.map((m) => m.type as string)).not.toContain('relay.sent');

  source.client.send('relay.end', ref(job));
  expect((await destination.client.next('relay.end')).payload).toEqual(ref(job));
  await eventually(async () => a.relays.stats().hosted === 0 && b.relays.stats().served === 0, 'both ends let go');

  const crossed = Buffer.concat(network.seen.slice(crossedBefore)).toString('latin1');
  const token = /authorization: Bearer (\S+)\r\n/i.exec(crossed)?.[1];
  expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  expect(crossed.includes(SECRET)).toBe(false);
  expect(crossed.includes('relay.source')).toBe(false);
  expect(logs.filter((l) => l.includes(token!) || l.includes(SECRET))).toEqual([]);
});

/** Dials B's link route directly; resolves with the HTTP status and body of a refusal, or 101 and the open socket. */
function dial(token: string | null): Promise<{ status: number; body: string; ws?: WebSocket }> {
  const port = (b.server.address() as { port: number }).port;
  const ws = new WebSocket(`ws://127.0.0.1:${port}${LINK_PATH}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve({ status: 101, body: '', ws }));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    ws.once('error', reject);
  });
}

test('the link route refuses forged, expired, misdirected and reused tokens (401) and runs that are not relayed from an agent there (409)', async () => {
  const destination = await agentOn(a);
  const source = await agentOn(b);
  const job = await relayedTransfer(a, owner.apiKey, destination, source);
  const key = a.vault.derivedKeys(LINK_KEY_PURPOSE)[0]!;
  const claims: Omit<PeerLinkClaims, 'nonce'> = {
    job_id: String(job._id), attempt: job.attempt, source_agent_id: source.id, instance_id: b.agentHub.instanceId, expires_at: Date.now() + 30_000,
  };
  const refused = { status: 401, body: JSON.stringify({ error: 'A valid relay link token is required' }) };
  const plain = await b.inject({ method: 'GET', url: LINK_PATH });
  expect({ status: plain.statusCode, body: plain.json() }).toEqual({ status: 426, body: { error: 'This endpoint accepts WebSocket connections from other control-plane instances only' } });
  expect(await dial(null)).toEqual(refused);
  expect(await dial(signPeerToken(randomBytes(32), claims))).toEqual(refused);
  const forged = signPeerToken(key, claims).split('.');
  expect(await dial(`${Buffer.from(JSON.stringify({ ...claims, attempt: 7, nonce: 'x'.repeat(22) })).toString('base64url')}.${forged[1]}`)).toEqual(refused);
  expect(await dial(signPeerToken(key, { ...claims, expires_at: Date.now() - 1 }))).toEqual(refused);
  expect(await dial(signPeerToken(key, { ...claims, instance_id: a.agentHub.instanceId }))).toEqual(refused);
  expect(await dial(signPeerToken(key, { ...claims, expires_at: Date.now() + 3_600_000 }))).toEqual(refused);

  const notRelayed = await makeTransfer(a, owner.apiKey, (await makeConnection(a, owner.apiKey, 'sftp')).id, (await makeConnection(a, owner.apiKey, 's3')).id);
  const conflict = await dial(signPeerToken(key, { ...claims, job_id: notRelayed.id }));
  expect(conflict).toEqual({ status: 409, body: JSON.stringify({ error: `Job ${notRelayed.id} attempt 1 is not running relayed from that agent` }) });
  expect((await dial(signPeerToken(key, { ...claims, source_agent_id: destination.id }))).status).toBe(409);

  // A valid token opens one link, once; B then serves the source (and ends it when the link goes).
  const token = signPeerToken(key, claims);
  const link = await dial(token);
  expect(link.status).toBe(101);
  expect((await source.client.next('relay.source')).payload).toMatchObject(ref(job));
  expect(await dial(token)).toEqual(refused);
  link.ws!.terminate();
  expect((await source.client.next('relay.end')).payload).toEqual({ ...ref(job), error: expect.stringMatching(/^The link to the instance hosting the relay closed/) });
  expect(b.relays.stats().served).toBe(0);
  expect(logs.filter((l) => l.includes(token))).toEqual([]);
});

test('a destination on A that does not read: each instance holds at most the window of the relay', async () => {
  const { destination, source, job } = await acrossInstances();
  destination.client.send('relay.credit', { ...ref(job), ...FULL_CREDIT });
  await source.client.next('relay.credit');
  destination.client.pause();
  const most = { a: 0, b: 0 };
  const sample = () => {
    most.a = Math.max(most.a, a.relays.stats().inFlightBytes);
    most.b = Math.max(most.b, b.relays.stats().inFlightBytes);
  };
  const sampler = setInterval(sample, 1);
  const full = frames(job, Array.from({ length: RELAY_WINDOW_BYTES / RELAY_CHUNK_BYTES }, () => RELAY_CHUNK_BYTES));
  for (const f of full) await source.client.sendBinary(f);
  await new Promise((resolve) => setTimeout(resolve, 300));
  clearInterval(sampler);
  sample();
  const bound = RELAY_WINDOW_BYTES + full.length * RELAY_FRAME_HEADER_BYTES;
  expect(most.a).toBeLessThanOrEqual(bound);
  expect(most.b).toBeLessThanOrEqual(bound);
  destination.client.resume();
  const got = await destination.client.binaryFrames(full.length);
  expect(Buffer.concat(got).equals(Buffer.concat(full))).toBe(true);
});

test('an instance that refuses the link (its agent cannot serve relays): the relay is lost and the job taken over, saying why', async () => {
  const fail = jest.spyOn(a.transfers, 'fail');
  const interrupt = jest.spyOn(a.transfers, 'interrupt');
  const destination = await agentOn(a);
  const source = await relayAgent(b, a, owner.apiKey, false);
  opened.push(source.client);
  const job = await relayedTransfer(a, owner.apiKey, destination, source);
  await assignRelay(a, job);
  const end = await destination.client.next('relay.end');
  expect(end.payload.error).toMatch(/^The link to instance .* holding relay source agent .* was lost: refused the relay link \(HTTP 409\)$/);
  expect(await takenOverOnce(job, interrupt)).toBe(end.payload.error);
  expect(failCalls(fail, job)).toEqual([]);
  expect(source.client.received.filter((m) => m.type !== 'welcome')).toEqual([]);
});

test('a network cut between the instances ends the relay on both: the destination and the source get relay.end, the job is taken over once, by the host', async () => {
  const failA = jest.spyOn(a.transfers, 'fail');
  const interrupt = jest.spyOn(a.transfers, 'interrupt');
  const failB = jest.spyOn(b.transfers, 'fail');
  const { destination, source, job } = await acrossInstances();
  destination.client.send('relay.credit', { ...ref(job), ...FULL_CREDIT });
  await source.client.next('relay.credit');
  network.cut();
  const end = await destination.client.next('relay.end');
  expect(end.payload.error).toMatch(/^The link to instance .* holding relay source agent .* was lost/);
  expect((await source.client.next('relay.end')).payload.error).toMatch(/^The link to the instance hosting the relay closed/);
  expect(await takenOverOnce(job, interrupt)).toBe(end.payload.error);
  expect([...failCalls(failA, job), ...failCalls(failB, job)]).toEqual([]);
});

test('the source agent leaving B ends the relay through the link: the destination is told why, the job is taken over once', async () => {
  const fail = jest.spyOn(a.transfers, 'fail');
  const interrupt = jest.spyOn(a.transfers, 'interrupt');
  const { destination, source, job } = await acrossInstances();
  source.client.ws.terminate();
  const error = `Relay source agent ${source.name} disconnected`;
  expect((await destination.client.next('relay.end')).payload).toEqual({ ...ref(job), error });
  expect(await takenOverOnce(job, interrupt)).toBe(error);
  expect(failCalls(fail, job)).toEqual([]);
});

test('a source on B past its credit is cut off by B; the host fails the job with B\'s full reason', async () => {
  const fail = jest.spyOn(a.transfers, 'fail');
  const { destination, source, job } = await acrossInstances();
  destination.client.send('relay.credit', { ...ref(job), entries: 0, bytes: 10 });
  await source.client.next('relay.credit');
  await source.client.sendBinary(frames(job, [11])[0]!);
  const error = `Relay source agent ${source.name} sent 1 bytes more than the destination granted`;
  expect((await source.client.next('relay.end')).payload).toEqual({ ...ref(job), error });
  expect((await destination.client.next('relay.end')).payload).toEqual({ ...ref(job), error });
  await eventually(async () => (await a.db.transfers.findById(job._id).lean())?.status === 'failed', 'the job failed');
  expect(failCalls(fail, job)).toEqual([[String(job._id), job.attempt, error]]);
  expect(destination.client.binaries).toEqual([]);
});

test('cancel on A reaches the source on B: relay.end on both sides', async () => {
  const fail = jest.spyOn(a.transfers, 'fail');
  const { destination, source, job } = await acrossInstances();
  expect((await transferAction(a, owner.apiKey, String(job._id), 'cancel')).json().data.status).toBe('cancelled');
  expect((await source.client.next('relay.end')).payload).toEqual({ ...ref(job), error: 'The transfer was cancelled' });
  await eventually(async () => destination.client.all('relay.end').length === 1 && destination.client.all('job.cancel').length === 1, 'the destination told');
  expect(failCalls(fail, job)).toEqual([]);
});

test('B shutting down takes the job over: the destination on A gets relay.end', async () => {
  const fail = jest.spyOn(a.transfers, 'fail');
  const interrupt = jest.spyOn(a.transfers, 'interrupt');
  const { destination, job } = await acrossInstances();
  bClosed = true;
  await b.close();
  const error = 'The control-plane instance carrying the relay is shutting down';
  expect((await destination.client.next('relay.end')).payload).toEqual({ ...ref(job), error });
  expect(await takenOverOnce(job, interrupt)).toBe(error);
  expect(failCalls(fail, job)).toEqual([]);
  expect(logs.filter((l) => l.includes(SECRET))).toEqual([]);
});

import { jest } from '@jest/globals';
import {
  CloseCodes, encodeRelayChunk, RELAY_CHUNK_BYTES, RELAY_FRAME_HEADER_BYTES, RELAY_WINDOW_BYTES, relayFrameHeader,
} from '@xfer/shared';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount, type TestAccount } from './helper.js';
import { Types } from 'mongoose';
import { counters, makeAgent, makeConnection, makeTransfer, SECRET, sha, transferAction } from './fixtures.js';
import { SourceSettler } from '../src/plugins/app/workflows/settle-step.js';
import { eventually, ProtocolClient } from './protocol-client.js';
import { assignRelay, entries, frames, FULL_CREDIT, ref, relayAgent, relayedTransfer, takenOverOnce, type RelayAgent } from './relay-fixtures.js';
import type { StoredTransfer } from '../src/plugins/app/transfers/index.js';

/**
 * Relays on one instance (docs/architecture.md "Relays"): both agents' sockets here, fake agents
 * speaking the real protocol (protocol-client.ts), the real database. What the scheduler will do
 * (pick two agents, send the relayed job.assign, call relays.start) is done by relay-fixtures.ts.
 */
let app: App;
let owner: TestAccount;
const logs: string[] = [];

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 1_000, jobLeaseMs: 3_000 }, { logs });
  await app.listen({ host: '127.0.0.1', port: 0 });
  owner = await createAccount(app);
});
afterAll(() => app.close());

const opened: ProtocolClient[] = [];
afterEach(() => {
  for (const c of opened.splice(0)) c.close();
  jest.restoreAllMocks();
});

async function agent(relay = true, account = owner): Promise<RelayAgent> {
  const a = await relayAgent(app, app, account.apiKey, relay);
  opened.push(a.client);
  return a;
}

/** Two relay agents and a job relayed between them, started: the source has its `relay.source`. */
async function started(attempt = 1) {
  const destination = await agent();
  const source = await agent();
  const job = await relayedTransfer(app, owner.apiKey, destination, source, attempt);
  await assignRelay(app, job);
  const relaySource = await source.client.next('relay.source');
  return { destination, source, job, relaySource };
}

const relayTypes = (client: ProtocolClient) => client.received.filter((m) => m.type.startsWith('relay.'));
const metric = async (line: RegExp) => Number(line.exec(await app.metrics.render())?.[1] ?? 0);
const failCalls = (spy: { mock: { calls: unknown[][] } }, job: StoredTransfer) => spy.mock.calls.filter((c) => String(c[0]) === String(job._id));

test('the welcome offers relays to agents that ask; any other session sending a relay frame is closed with 4400', async () => {
  const plain = await agent(false);
  expect(plain.client.received[0]).toMatchObject({ type: 'welcome' });
  expect((plain.client.received[0]!.payload as { relay?: boolean }).relay).toBeUndefined();
  plain.client.sendRaw(encodeRelayChunk('a'.repeat(24), 1, Buffer.from('x')), true);
  expect(await plain.client.closed).toEqual({ code: CloseCodes.protocolError, reason: 'binary frames are not part of this session' });

  const other = await agent(false);
  other.client.send('relay.credit', { job_id: 'a'.repeat(24), attempt: 1, entries: 1, bytes: 1 });
  expect(await other.client.closed).toEqual({ code: CloseCodes.protocolError, reason: 'relay.credit is not part of this session' });
});

test('relay.source carries the decrypted source to the source agent only; frames go through byte-exact and in order, both ways', async () => {
  const bytesBefore = await metric(/^xfer_relay_bytes_total (\d+)$/m);
  const { destination, source, job, relaySource } = await started();
  expect(relaySource.payload).toMatchObject({ ...ref(job), source_path: '/in', concurrency: job.options!.concurrency, source: { type: 'sftp', credentials: { password: SECRET } } });
  const assign = await destination.client.next('job.assign');
  expect(assign.payload).toMatchObject({ ...ref(job), relay: { source_type: 'sftp' } });
  expect(assign.payload.source).toBeUndefined();
  expect(destination.client.all('relay.source')).toEqual([]);
  expect(app.relays.stats()).toMatchObject({ hosted: 1, served: 0 });
  expect(await metric(/^xfer_relays_active\{role="host"\} (\d+)$/m)).toBe(1);

  // Destination → source: credit and wants, interleaved, arrive as sent and in order.
  const toSource = [
    { type: 'relay.credit', payload: { ...ref(job), entries: 2, bytes: 1000 } },
    { type: 'relay.credit', payload: { ...ref(job), entries: 998, bytes: RELAY_WINDOW_BYTES - 1000 } },
  ] as const;
  for (const m of toSource) destination.client.send(m.type, m.payload);
  await source.client.next('relay.credit');
  await source.client.next('relay.credit');

  // Source → destination: listing pages, in order.
  const pages = [entries(3, 'a'), entries(2, 'b')];
  source.client.send('relay.entries', { ...ref(job), entries: pages[0]!, done: false });
  source.client.send('relay.entries', { ...ref(job), entries: pages[1]!, done: true });
  expect((await destination.client.next('relay.entries')).payload).toEqual({ ...ref(job), entries: pages[0], done: false });
  expect((await destination.client.next('relay.entries')).payload).toEqual({ ...ref(job), entries: pages[1], done: true });

  const wants = [{ path: 'a-0', size: 100 }, { path: 'b-1', size: 100 }];
  destination.client.send('relay.want', { ...ref(job), files: [wants[0]!] });
  destination.client.send('relay.want', { ...ref(job), files: [wants[1]!] });
  await source.client.next('relay.want');
  await source.client.next('relay.want');
  expect(relayTypes(source.client).map((m) => [m.type, m.payload])).toEqual([
    ['relay.source', relaySource.payload],
    ...toSource.map((m) => [m.type, m.payload]),
    ['relay.want', { ...ref(job), files: [wants[0]] }],
    ['relay.want', { ...ref(job), files: [wants[1]] }],
  ]);

  // Binary frames, of every size up to a full chunk, arrive unchanged and in order.
  const sent = frames(job, [1, 1000, RELAY_CHUNK_BYTES, 0, 65_537, RELAY_CHUNK_BYTES]);
  for (const f of sent) await source.client.sendBinary(f);
  const got = await destination.client.binaryFrames(sent.length);
  expect(got.length).toBe(sent.length);
  got.forEach((f, i) => expect(f.equals(sent[i]!)).toBe(true));
  const payload = sent.reduce((n, f) => n + f.length - RELAY_FRAME_HEADER_BYTES, 0);
  expect(await metric(/^xfer_relay_bytes_total (\d+)$/m)).toBe(bytesBefore + payload);

  // The destination ends it: the source is told, as the destination said it.
  destination.client.send('relay.end', ref(job));
  expect((await source.client.next('relay.end')).payload).toEqual(ref(job));
  await eventually(async () => app.relays.stats().hosted === 0, 'the relay is gone');
  expect(destination.client.all('relay.end')).toEqual([]);
  expect(await metric(/^xfer_relays_ended_total\{outcome="finished"\} (\d+)$/m)).toBeGreaterThanOrEqual(1);
});

test('a source that sends more bytes than granted is cut off: both sides get relay.end, the frame past the credit is not forwarded, the job fails', async () => {
  const fail = jest.spyOn(app.transfers, 'fail');
  const { destination, source, job } = await started();
  destination.client.send('relay.credit', { ...ref(job), entries: 0, bytes: 1000 });
  await source.client.next('relay.credit');
  const [within, past] = frames(job, [600, 401]);
  await source.client.sendBinary(within!);
  await destination.client.binaryFrames(1);
  await source.client.sendBinary(past!);
  const error = 'Relay source agent ' + source.name + ' sent 1 bytes more than the destination granted';
  expect((await source.client.next('relay.end')).payload).toEqual({ ...ref(job), error });
  expect((await destination.client.next('relay.end')).payload).toEqual({ ...ref(job), error });
  expect(destination.client.binaries).toHaveLength(1);
  const after = await eventually(async () => {
    const doc = await app.db.transfers.findById(job._id).lean();
    return doc?.status === 'failed' && doc;
  }, 'the job failed');
  expect(after.error).toBe(error);
  expect(failCalls(fail, job)).toHaveLength(1);
  // Its frames still in flight now meet a relay that is over: one relay.end answer, no more.
  await source.client.sendBinary(frames(job, [10])[0]!);
  await source.client.sendBinary(frames(job, [10])[0]!);
  await eventually(async () => source.client.all('relay.end').length === 2, 'the stale answer');
  // Binary frames are handled as they arrive, before any later message: once a query sent after
  // them is answered, both stale frames have been handled (an answer to either was sent before).
  source.client.send('job.verified.query', { job_id: String(job._id), request_id: 'after-the-frames', paths: [] });
  await eventually(async () => source.client.all('job.verified').some((m) => m.payload.request_id === 'after-the-frames'), 'the later query answered');
  expect(source.client.all('relay.end')).toHaveLength(2);
});

test('the source\'s relay.sent is recorded by the host for the attempt and never forwarded; vouching for more files than were wanted breaks the relay', async () => {
  const { destination, source, job } = await started();
  expect((await app.db.relayedAttempts.find({ job_id: job._id }).lean()).map((d) => d.attempt)).toEqual([1]);
  destination.client.send('relay.credit', { ...ref(job), ...FULL_CREDIT });
  await source.client.next('relay.credit');
  source.client.send('relay.entries', { ...ref(job), entries: entries(3), done: true });
  await destination.client.next('relay.entries');
  destination.client.send('relay.want', { ...ref(job), files: [{ path: 'file-0', size: 100 }, { path: 'file-1', size: 100 }] });
  await source.client.next('relay.want');
  source.client.send('relay.sent', { ...ref(job), files: [{ path: 'file-0', size: 100, sha256: sha(1) }, { path: 'file-1', size: 100, sha256: sha(2) }] });
  const recorded = await eventually(async () => {
    const docs = await app.db.relaySentFiles.find({ job_id: job._id }).sort({ path: 1 }).lean();
    return docs.length === 2 && docs;
  }, 'the source\'s record');
  expect(recorded.map((d) => [d.attempt, d.path, d.size, d.sha256, String(d.account_id)])).toEqual([
    [1, 'file-0', 100, sha(1), String(job.account_id)], [1, 'file-1', 100, sha(2), String(job.account_id)],
  ]);
  // Vouching for a third file when two were wanted: a breach of the protocol.
  source.client.send('relay.sent', { ...ref(job), files: [{ path: 'file-2', size: 100, sha256: sha(3) }] });
  const error = `Relay source agent ${source.name} vouched for 1 files more than the destination wanted`;
  expect((await destination.client.next('relay.end')).payload.error).toBe(error);
  expect(destination.client.received.map((m) => m.type as string)).not.toContain('relay.sent');
  expect(await app.db.relaySentFiles.countDocuments({ job_id: job._id })).toBe(2);
});

test('each side vouches only for itself: delete_source deletes only what the relay\'s source agent sent with the size and SHA-256 the destination verified', async () => {
  const key = (await createAccount(app)).apiKey;
  // No agent serves both ends: the scheduler relays (source agent: sftp and settle; destination agent: s3).
  const src = await makeConnection(app, key, 'sftp');
  const dst = await makeConnection(app, key, 's3');
  const sourceAgent = await makeAgent(app, key);
  const source = (await ProtocolClient.connect(app, sourceAgent.token, { connector_types: ['sftp'], relay: true, settle: true })).client;
  const destinationAgent = await makeAgent(app, key);
  const destination = (await ProtocolClient.connect(app, destinationAgent.token, { connector_types: ['s3'], relay: true })).client;
  opened.push(source, destination);
  const wf = await app.inject({ method: 'POST', url: '/api/v1/workflows', headers: auth(key), payload: {
    name: `relay settle ${String(Date.now())}`,
    steps: [{ type: 'transfer', sourceConnectionId: src.id, sourcePath: '/inbox', destinationConnectionId: dst.id, destinationPath: '/archive' }, { type: 'delete_source' }],
  } });
  expect(wf.statusCode).toBe(201);
  const run = await app.inject({ method: 'POST', url: `/api/v1/workflows/${wf.json().data.id as string}/run`, headers: auth(key), payload: {} });
  expect(run.statusCode).toBe(201);
  const runId = run.json().data.id as string;

  const assign = (await destination.next('job.assign')).payload;
  expect(assign.relay).toEqual({ source_type: 'sftp' });
  const job = { job_id: assign.job_id, attempt: assign.attempt };
  await source.next('relay.source');
  destination.send('job.accepted', { job_id: job.job_id });
  destination.send('relay.credit', { ...job, ...FULL_CREDIT });
  await source.next('relay.credit');
  const listed = ['honest.csv', 'other-hash.csv', 'unread.csv'].map((path) => ({ path, kind: 'file' as const, size: 100 }));
  source.send('relay.entries', { ...job, entries: listed, done: true });
  await destination.next('relay.entries');
  destination.send('relay.want', { ...job, files: listed.map(({ path, size }) => ({ path, size })) });
  await source.next('relay.want');
  // The source read two of them whole (the third failed to read): it vouches for those two.
  source.send('relay.sent', { ...job, files: [{ path: 'honest.csv', size: 100, sha256: sha(1) }, { path: 'other-hash.csv', size: 100, sha256: sha(2) }] });
  await eventually(async () => (await app.db.relaySentFiles.countDocuments({ job_id: new Types.ObjectId(job.job_id) })) === 2, 'the source\'s record');

  // A compromised destination claims more than the source sent: another hash, a file never read, one never listed.
  const verified = (path: string, n: number) => ({ path, status: 'copied' as const, size: 100, sha256: sha(n), verified_by: 'sha256' });
  const files = [verified('honest.csv', 1), verified('other-hash.csv', 9), verified('unread.csv', 3), verified('secret/keys.txt', 4)];
  destination.send('job.progress', { job_id: job.job_id, ...counters(4, 4, 400), listing_done: true, files });
  destination.send('relay.end', job);
  destination.send('job.completed', { job_id: job.job_id, ...counters(4, 4, 400) });

  const settle = (await source.next('source.settle')).payload;
  expect(settle).toMatchObject({ action: 'delete', source_path: '/inbox', files: [{ path: 'honest.csv', size: 100 }] });
  source.send('source.settle.result', { request_id: settle.request_id, results: [{ path: 'honest.csv', outcome: 'deleted' }] });
  const done = await eventually(async () => {
    const r = (await app.inject({ method: 'GET', url: `/api/v1/workflow-runs/${runId}`, headers: auth(key) })).json().data;
    return r.status !== 'running' && r;
  }, 'the run ends');
  expect(done).toMatchObject({
    status: 'failed',
    steps: [{ status: 'completed' }, {
      type: 'delete_source', status: 'failed', files: { deleted: 1, failed: 3 },
      error: '3 files could not be deleted (first: other-hash.csv: its size or SHA-256 at the destination differs from what the relay\'s source agent read (attempt 1))',
    }],
  });
  expect(source.all('source.settle')).toHaveLength(1);
});

test('a relayed attempt\'s verified skips: settled only when the attempt they name recorded the copy and, relayed, its source vouched for it', async () => {
  const account = await createAccount(app);
  const src = await makeConnection(app, account.apiKey, 'sftp');
  const dst = await makeConnection(app, account.apiKey, 's3');
  const created = await makeTransfer(app, account.apiKey, src.id, dst.id);
  const jobId = new Types.ObjectId(created.id);
  await app.db.transfers.updateOne({ _id: jobId }, { $set: { status: 'completed', attempt: 2, mode: 'relay' } });
  await app.db.relayedAttempts.insertMany([1, 2].map((attempt) => ({ _id: `${created.id}:${attempt}`, account_id: new Types.ObjectId(account.accountId), job_id: jobId, attempt })));
  const job = (await app.db.transfers.collection.findOne<StoredTransfer>({ _id: jobId }))!;
  const file = (attempt: number, path: string, status: 'copied' | 'skipped', n: number) => ({
    account_id: job.account_id, job_id: jobId, attempt, path, status, size: 100, sha256: sha(n), verified_by: status === 'copied' ? 'sha256' : 'attempt 1', error: null, created_at: new Date(),
  });
  await app.db.transferFiles.insertMany([
    file(1, 'earlier.csv', 'copied', 5), file(1, 'unsent.csv', 'copied', 7),
    // Attempt 2's destination: two skips attempt 1 did verify, one it never recorded.
    file(2, 'earlier.csv', 'skipped', 5), file(2, 'forged.csv', 'skipped', 6), file(2, 'unsent.csv', 'skipped', 7),
  ]);
  await app.db.relaySentFiles.create({ account_id: job.account_id, job_id: jobId, attempt: 1, path: 'earlier.csv', size: 100, sha256: sha(5) });
  const settler = new SourceSettler({ db: app.db, agents: app.agents, requests: app.agentRequests });
  const agentOf = await makeAgent(app, account.apiKey);
  const sourceAgent = (await ProtocolClient.connect(app, agentOf.token, { connector_types: ['sftp'], settle: true })).client;
  opened.push(sourceAgent);
  const settled = settler.settle(job, 'delete', undefined, { between: async () => true });
  const settle = (await sourceAgent.next('source.settle')).payload;
  expect(settle.files).toEqual([{ path: 'earlier.csv', size: 100 }]);
  sourceAgent.send('source.settle.result', { request_id: settle.request_id, results: [{ path: 'earlier.csv', outcome: 'deleted' }] });
  expect(await settled).toEqual({
    files: { moved: 0, deleted: 1, gone: 0, changed: 0, unverified: 0, failed: 2 },
    error: '2 files could not be deleted (first: forged.csv: the relay\'s destination agent said attempt 1 verified it, which that attempt did not record)',
  });
});

test('listing entries past the entry credit, and a grant past the window, break the relay', async () => {
  const first = await started();
  first.destination.client.send('relay.credit', { ...ref(first.job), entries: 2, bytes: 0 });
  await first.source.client.next('relay.credit');
  first.source.client.send('relay.entries', { ...ref(first.job), entries: entries(3), done: true });
  expect((await first.destination.client.next('relay.end')).payload.error).toBe(`Relay source agent ${first.source.name} sent 1 listing entries more than the destination granted`);
  expect(first.destination.client.all('relay.entries')).toEqual([]);

  const second = await started();
  second.destination.client.send('relay.credit', { ...ref(second.job), ...FULL_CREDIT });
  second.destination.client.send('relay.credit', { ...ref(second.job), entries: 0, bytes: 1 });
  const error = `Relay destination agent ${second.destination.name} granted more credit than the relay window (1000 entries, ${RELAY_WINDOW_BYTES} bytes)`;
  expect((await second.source.client.next('relay.end')).payload.error).toBe(error);
  expect((await second.destination.client.next('relay.end')).payload.error).toBe(error);
  expect(second.source.client.all('relay.credit')).toHaveLength(1);
});

test('a destination that does not read: the server holds at most the window of the relay, then cuts the source off', async () => {
  const { destination, source, job } = await started();
  destination.client.send('relay.credit', { ...ref(job), ...FULL_CREDIT });
  await source.client.next('relay.credit');
  destination.client.pause();
  let most = 0;
  const sampler = setInterval(() => (most = Math.max(most, app.relays.stats().inFlightBytes)), 1);
  const full = frames(job, Array.from({ length: RELAY_WINDOW_BYTES / RELAY_CHUNK_BYTES }, () => RELAY_CHUNK_BYTES));
  for (const f of full) await source.client.sendBinary(f);
  await new Promise((resolve) => setTimeout(resolve, 300));
  clearInterval(sampler);
  most = Math.max(most, app.relays.stats().inFlightBytes);
  // Held for a destination that reads nothing: never more than the window (frame headers included).
  expect(most).toBeLessThanOrEqual(RELAY_WINDOW_BYTES + full.length * RELAY_FRAME_HEADER_BYTES);
  expect(app.relays.stats().hosted).toBe(1);
  // One byte more than granted ends it; what the relay held is let go.
  await source.client.sendBinary(frames(job, [1])[0]!);
  expect((await source.client.next('relay.end')).payload.error).toMatch(/sent 1 bytes more than the destination granted/);
  expect(app.relays.stats()).toMatchObject({ hosted: 0, inFlightBytes: 0, inFlightFrames: 0 });
  // Once it reads again, the destination finds everything that was granted, then the end.
  destination.client.resume();
  const got = await destination.client.binaryFrames(full.length);
  expect(Buffer.concat(got).equals(Buffer.concat(full))).toBe(true);
  expect((await destination.client.next('relay.end')).payload.error).toMatch(/sent 1 bytes more/);
});

test('frames from a session that plays no part (another agent of the account, another account\'s agent, another attempt) get relay.end and change nothing', async () => {
  const { destination, source, job } = await started(2);
  const stranger = await agent();
  const otherAccount = await createAccount(app);
  const foreign = await agent(true, otherAccount);
  const answer = (attempt = job.attempt) => ({ job_id: String(job._id), attempt, error: expect.stringMatching(/^Agent .* plays no relay of job /) });

  for (const intruder of [stranger, foreign]) {
    intruder.client.send('relay.credit', { ...ref(job), ...FULL_CREDIT });
    intruder.client.send('relay.entries', { ...ref(job), entries: entries(1), done: true });
    intruder.client.send('relay.want', { ...ref(job), files: [{ path: 'x', size: 1 }] });
    await intruder.client.sendBinary(frames(job, [10])[0]!);
    expect((await intruder.client.next('relay.end')).payload).toEqual(answer());
  }
  // The right agents, the wrong attempt.
  source.client.send('relay.entries', { ...ref(job), attempt: 1, entries: entries(1), done: true });
  expect((await source.client.next('relay.end')).payload).toEqual(answer(1));
  destination.client.send('relay.credit', { ...ref(job), attempt: 3, entries: 1, bytes: 1 });
  expect((await destination.client.next('relay.end')).payload).toEqual(answer(3));

  // Nothing reached either side, and the relay still works.
  expect(source.client.all('relay.credit')).toEqual([]);
  expect(destination.client.all('relay.entries')).toEqual([]);
  expect(destination.client.binaries).toEqual([]);
  destination.client.send('relay.credit', { ...ref(job), entries: 1, bytes: 5 });
  expect((await source.client.next('relay.credit')).payload).toEqual({ ...ref(job), entries: 1, bytes: 5 });
  const [f] = frames(job, [5]);
  await source.client.sendBinary(f!);
  expect((await destination.client.binaryFrames(1))[0]!.equals(f!)).toBe(true);
  for (const c of [stranger.client, foreign.client]) expect(c.ws.readyState).toBe(c.ws.OPEN);
  expect(app.relays.stats().hosted).toBe(1);
});

test('malformed binary frames close the sender with 4400; the relay and the job are untouched', async () => {
  const { destination, source, job } = await started();
  const bad: Array<[string, Buffer]> = [
    ['too short', Buffer.from([0x78, 0x01, 0x00])],
    ['wrong magic', Buffer.concat([Buffer.from([0x00]), relayFrameHeader(String(job._id), 1).subarray(1), Buffer.from('x')])],
    ['wrong kind', Buffer.concat([Buffer.from([0x78, 0x02]), relayFrameHeader(String(job._id), 1).subarray(2), Buffer.from('x')])],
    ['attempt 0', Buffer.concat([relayFrameHeader(String(job._id), 1).subarray(0, 14), Buffer.alloc(4), Buffer.from('x')])],
    ['payload too large', Buffer.concat([relayFrameHeader(String(job._id), 1), Buffer.alloc(RELAY_CHUNK_BYTES + 1)])],
  ];
  for (const [what, frame] of bad) {
    const hostile = await agent();
    hostile.client.sendRaw(frame, true);
    const closed = await hostile.client.closed;
    expect({ what, code: closed.code }).toEqual({ what, code: CloseCodes.protocolError });
  }
  expect(app.relays.stats().hosted).toBe(1);
  expect((await app.db.transfers.findById(job._id).lean())!.status).toBe('in-progress');
  destination.client.send('relay.credit', { ...ref(job), entries: 0, bytes: 3 });
  await source.client.next('relay.credit');
  const [f] = frames(job, [3]);
  await source.client.sendBinary(f!);
  expect((await destination.client.binaryFrames(1))[0]!.equals(f!)).toBe(true);
});

test('a side that disconnects ends the relay: the other side gets relay.end and the job is taken over once', async () => {
  const fail = jest.spyOn(app.transfers, 'fail');
  const interrupt = jest.spyOn(app.transfers, 'interrupt');
  const lostSource = await started();
  lostSource.source.client.ws.terminate();
  const error = `Relay source agent ${lostSource.source.name} disconnected`;
  expect((await lostSource.destination.client.next('relay.end')).payload).toEqual({ ...ref(lostSource.job), error });
  expect(await takenOverOnce(lostSource.job, interrupt)).toBe(error);
  // The destination agent, told, reports its run interrupted: that changes nothing more.
  lostSource.destination.client.send('job.failed', {
    job_id: String(lostSource.job._id), files_total: 0, files_transferred: 0, files_skipped: 0, files_failed: 0, bytes_transferred: 0, error, interrupted: true,
  });
  expect(await takenOverOnce(lostSource.job, interrupt)).toBe(error);

  const lostDestination = await started();
  lostDestination.destination.client.close();
  expect((await lostDestination.source.client.next('relay.end')).payload).toEqual({
    ...ref(lostDestination.job), error: `Relay destination agent ${lostDestination.destination.name} disconnected`,
  });
  expect(await takenOverOnce(lostDestination.job, interrupt)).toBe(`Relay destination agent ${lostDestination.destination.name} disconnected`);
  expect([...failCalls(fail, lostSource.job), ...failCalls(fail, lostDestination.job)]).toEqual([]);
  expect(await metric(/^xfer_relays_ended_total\{outcome="lost"\} (\d+)$/m)).toBeGreaterThanOrEqual(2);
});

test('cancel mid-relay: the destination gets job.cancel, both sides relay.end, and nothing is taken over', async () => {
  const fail = jest.spyOn(app.transfers, 'fail');
  const { destination, source, job } = await started();
  destination.client.send('job.accepted', { job_id: String(job._id) });
  destination.client.send('relay.credit', { ...ref(job), ...FULL_CREDIT });
  await source.client.next('relay.credit');
  await source.client.sendBinary(frames(job, [100])[0]!);
  await destination.client.binaryFrames(1);
  expect((await transferAction(app, owner.apiKey, String(job._id), 'cancel')).json().data.status).toBe('cancelled');
  // Two instance loops send these (the agents' reconciliation, the relays' watch): in either order.
  await eventually(async () => destination.client.all('job.cancel').length === 1 && destination.client.all('relay.end').length === 1, 'the destination told');
  expect(destination.client.all('job.cancel')[0]!.payload.job_id).toBe(String(job._id));
  expect(destination.client.all('relay.end')[0]!.payload).toEqual({ ...ref(job), error: 'The transfer was cancelled' });
  expect((await source.client.next('relay.end')).payload).toEqual({ ...ref(job), error: 'The transfer was cancelled' });
  expect(failCalls(fail, job)).toEqual([]);
  expect(app.relays.stats().hosted).toBe(0);
});

test('a run that ends without relay.end (the destination reported it completed) ends the relay: the source is told', async () => {
  const { destination, source, job } = await started();
  destination.client.send('job.accepted', { job_id: String(job._id) });
  destination.client.send('job.completed', { job_id: String(job._id), files_total: 0, files_transferred: 0, files_skipped: 0, files_failed: 0, bytes_transferred: 0 });
  expect((await source.client.next('relay.end')).payload).toEqual({ ...ref(job), error: 'The run ended (completed)' });
  expect((await app.db.transfers.findById(job._id).lean())!.status).toBe('completed');
  expect(app.relays.stats().hosted).toBe(0);
});

test('a relay whose source connection was deleted fails the job before anything is sent to the source', async () => {
  const destination = await agent();
  const source = await agent();
  const job = await relayedTransfer(app, owner.apiKey, destination, source);
  await app.db.connections.deleteOne({ _id: job.source_connection_id });
  await assignRelay(app, job);
  const error = `The source connection ${String(job.source_connection_id)} was deleted before the job could start`;
  expect((await destination.client.next('relay.end')).payload).toEqual({ ...ref(job), error });
  await eventually(async () => (await app.db.transfers.findById(job._id).lean())?.error === error, 'the job failed');
  expect(source.client.received.filter((m) => m.type !== 'welcome')).toEqual([]);
});

test('no credential or relay secret reached a log line', () => {
  expect(logs.length).toBeGreaterThan(10);
  expect(logs.some((l) => l.includes('relay started'))).toBe(true);
  expect(logs.filter((l) => l.includes(SECRET))).toEqual([]);
});

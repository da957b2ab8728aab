import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { auth, buildTestApp, createAccount } from './helper.js';
import { counters, getTransfer, makeAgent, makeConnection, makeTransfer, sha, transferAction } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/**
 * Jobs outlive the control plane: reports are acknowledged once persisted, jobs whose reports the
 * agent still holds are waited for, and a lease that ran out while no instance was up is counted
 * again from when an instance starts.
 */
const LEASE_MS = 2_000;
const settings = { dispatchPollMs: 50, agentHeartbeatMs: 200, jobLeaseMs: LEASE_MS };
let app: App;
beforeAll(async () => {
  app = await buildTestApp(settings);
  await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => app.close());

const files = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => ({ path: `f-${from + i}.bin`, status: 'copied' as const, size: 10, sha256: sha(from + i), verified_by: 'sha256' }));

/** A job running on an agent (assigned and accepted) on `on`; the agent's client says `acks`. */
async function running(on: App, key: string, agentToken: string, srcId: string, dstId: string, hello = { acks: true }) {
  const { client, welcome } = await ProtocolClient.connect(on, agentToken, hello);
  const job = await makeTransfer(on, key, srcId, dstId);
  expect((await transferAction(on, key, job.id, 'execute', '?wait=false')).statusCode).toBe(202);
  await client.next('job.assign');
  client.send('job.accepted', { job_id: job.id });
  await eventually(async () => (await on.db.transfers.findById(job.id).lean())?.accepted_at, 'job accepted');
  return { client, welcome, job };
}

async function fixture(on: App) {
  const account = await createAccount(on);
  const agent = await makeAgent(on, account.apiKey);
  const src = await makeConnection(on, account.apiKey, 'sftp');
  const dst = await makeConnection(on, account.apiKey, 's3');
  return { key: account.apiKey, agent, src, dst };
}

test('numbered reports are acknowledged once persisted; an agent that did not ask gets no acks', async () => {
  const f = await fixture(app);
  const { client, welcome, job } = await running(app, f.key, f.agent.token, f.src.id, f.dst.id);
  expect(welcome.acks).toBe(true);
  client.send('job.progress', { job_id: job.id, seq: 1, ...counters(4, 2, 20), listing_done: true, files: files(0, 2) });
  client.send('job.completed', { job_id: job.id, seq: 2, ...counters(4, 4, 40) });
  const acked = await eventually(async () => {
    const seqs = client.all('ack').flatMap((m) => m.payload.seqs);
    return seqs.includes(1) && seqs.includes(2) && seqs;
  }, 'both reports acknowledged');
  expect(acked.sort()).toEqual([1, 2]);
  // Acknowledged means written: the file results and the end are in the database.
  expect(await app.db.transferFiles.countDocuments({ job_id: new Types.ObjectId(job.id) })).toBe(2);
  expect(await getTransfer(app, f.key, job.id)).toMatchObject({ status: 'completed', files_transferred: 4 });
  // Sent again (its ack was lost with a socket): changes nothing, acknowledged again.
  client.send('job.completed', { job_id: job.id, seq: 2, ...counters(4, 4, 40) });
  await eventually(async () => client.all('ack').flatMap((m) => m.payload.seqs).filter((s) => s === 2).length === 2, 'duplicate acknowledged');
  client.close();

  const g = await fixture(app);
  const old = await running(app, g.key, g.agent.token, g.src.id, g.dst.id, { acks: false });
  expect(old.welcome.acks).toBeUndefined();
  old.client.send('job.completed', { job_id: old.job.id, seq: 1, ...counters(1, 1, 1) });
  await eventually(async () => (await getTransfer(app, g.key, old.job.id)).status === 'completed', 'completed');
  expect(old.client.all('ack')).toEqual([]);
  old.client.close();
});

test("jobs whose reports the agent still holds are waited for after a reconnect, not settled as lost", async () => {
  const f = await fixture(app);
  const { client, job } = await running(app, f.key, f.agent.token, f.src.id, f.dst.id);
  client.ws.terminate();
  await client.closed;
  const again = await ProtocolClient.connect(app, f.agent.token, { acks: true, running_jobs: [], held_jobs: [job.id] });
  // Not unconfirmed, so no resync ping whose pong would settle it as lost before the held reports
  // arrive (they may wait on the agent's disk for acks of earlier ones). A resync ping goes out
  // right after the welcome: a ping asked for later (POST /agents/:id/test) follows it on the
  // socket, so once that one is here, any resync ping would be too.
  const test = app.inject({ method: 'POST', url: `/api/v1/agents/${f.agent.id}/test`, headers: auth(f.key) });
  const request = await eventually(() => app.db.agentRequests.findOne({ agent_id: new Types.ObjectId(f.agent.id) }).lean(), 'the test request');
  const asked = await eventually(async () => again.client.all('ping').find((m) => m.payload.request_id === String(request._id)), 'the ping asked for');
  expect(again.client.all('ping')).toEqual([asked]);
  again.client.send('pong', { request_id: asked.payload.request_id });
  expect((await test).json().data).toMatchObject({ success: true });
  expect((await getTransfer(app, f.key, job.id)).status).toBe('in-progress');
  again.client.send('job.completed', { job_id: job.id, seq: 7, ...counters(3, 3, 30) });
  await eventually(async () => (await getTransfer(app, f.key, job.id)).status === 'completed', 'held report applied');
  again.client.close();
});

test('a lease that ran out while no instance was up is counted again from the start of the next instance', async () => {
  const first = await buildTestApp(settings, { dropDatabase: false });
  await first.listen({ host: '127.0.0.1', port: 0 });
  const f = await fixture(first);
  const back = await running(first, f.key, f.agent.token, f.src.id, f.dst.id);
  const lost = await running(first, f.key, (await makeAgent(first, f.key)).token, f.src.id, f.dst.id);
  const expiry = (await first.db.transfers.findById(lost.job.id).lean())!.lease!.expires_at.getTime();
  await first.close();
  // The outage: the leases run out while no instance is up.
  await new Promise((r) => setTimeout(r, Math.max(0, expiry - Date.now() + 200)));
  const startedAt = Date.now();
  const second = await buildTestApp({ ...settings, databaseName: first.config.databaseName, masterKeys: first.config.masterKeys }, { dropDatabase: true });
  try {
    await second.listen({ host: '127.0.0.1', port: 0 });
    // The agent that is still running its job comes back within the lease and keeps it.
    const again = await ProtocolClient.connect(second, f.agent.token, { acks: true, running_jobs: [back.job.id] });
    again.client.send('job.completed', { job_id: back.job.id, seq: 1, ...counters(1, 1, 1) });
    await eventually(async () => (await getTransfer(second, f.key, back.job.id)).status === 'completed', 'the job of the agent that came back completes');
    // The run whose agent never comes back is taken over, but only after the new instance has been up a whole lease.
    const takenOver = await eventually(async () => {
      const j = await getTransfer(second, f.key, lost.job.id);
      return j.attempt === 2 && j;
    }, 'the run of the agent that never came back is taken over');
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(LEASE_MS - 100);
    expect(takenOver.last_interruption).toMatchObject({ attempt: 1, reason: expect.stringMatching(/stopped responding/) });
    again.client.close();
  } finally {
    await second.close();
  }
});

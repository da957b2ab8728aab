import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { MAX_STOPPING } from '../src/plugins/app/agents/session.js';
import { MAX_PENDING_FILES } from '../src/plugins/app/agents/runs.js';
import { buildTestApp, createAccount } from './helper.js';
import { counters, makeAgent, makeConnection, makeTransfer, sha, transferAction } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/**
 * What an agent's input can make the control plane hold, and that such input never stops other
 * agents' work (docs/architecture.md "Agents and jobs": the bounds).
 */
let app: App;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200 });
  await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => app.close());

async function connectedAgent(apiKey: string, hello: Parameters<typeof ProtocolClient.connect>[2] = {}) {
  const agent = await makeAgent(app, apiKey);
  const { client } = await ProtocolClient.connect(app, agent.token, hello);
  return { agent, client };
}

const files = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => ({ path: `many/file-${from + i}.bin`, status: 'copied' as const, size: 1, sha256: sha(from + i), verified_by: 'sha256' }));

describe('reports on jobs an agent was never given', () => {
  test('are answered with job.cancel and never stop jobs from being sent to other agents, whatever the id', async () => {
    const hostile = await createAccount(app);
    const { client: noisy } = await connectedAgent(hostile.apiKey);
    for (const job_id of ['x', 'constructor', '__proto__', 'abcdefghijkl', new Types.ObjectId().toHexString()]) {
      noisy.send('job.progress', { job_id, ...counters(1, 1, 1), listing_done: false, files: [] });
      expect((await noisy.next('job.cancel')).payload.job_id).toBe(job_id);
    }
    // Meanwhile, with the noisy agent going on, another account's agent gets its job.
    const noise = setInterval(() => noisy.send('job.accepted', { job_id: `x-${Date.now()}` }), 200);
    try {
      const owner = await createAccount(app);
      const { client } = await connectedAgent(owner.apiKey);
      const job = await makeTransfer(app, owner.apiKey, (await makeConnection(app, owner.apiKey, 'sftp')).id, (await makeConnection(app, owner.apiKey, 's3')).id);
      expect((await transferAction(app, owner.apiKey, job.id, 'execute', '?wait=false')).statusCode).toBe(202);
      expect((await client.next('job.assign')).payload.job_id).toBe(job.id);
      client.close();
    } finally {
      clearInterval(noise);
    }
    noisy.close();
  });

  test(`a session remembers at most ${MAX_STOPPING} runs told to stop; past it the stop is still sent`, async () => {
    const account = await createAccount(app);
    const running = Array.from({ length: MAX_STOPPING }, () => new Types.ObjectId().toHexString());
    const { agent, client } = await connectedAgent(account.apiKey, { running_jobs: running });
    const session = app.agentHub.get(agent.id)!;
    expect(session.stopping.size).toBe(MAX_STOPPING);
    client.send('job.accepted', { job_id: 'one-more' });
    client.send('job.progress', { job_id: 'and-another', ...counters(1, 1, 1), listing_done: false, files: [] });
    expect((await client.next('job.cancel')).payload.job_id).toBe('one-more');
    expect((await client.next('job.cancel')).payload.job_id).toBe('and-another');
    expect(session.stopping.size).toBe(MAX_STOPPING);
    client.close();
  });
});

describe('an agent that does not read its socket', () => {
  test('is dropped once what was sent to it and not read passes the bound, instead of growing the send buffer', async () => {
    const account = await createAccount(app);
    const { agent, client } = await connectedAgent(account.apiKey);
    // Stop reading: every job.cancel the server answers with stays in its send buffer.
    (client.ws as unknown as { _socket: { pause(): void } })._socket.pause();
    const report = (i: number) => JSON.stringify({ v: 1, type: 'job.accepted', id: String(i), payload: { job_id: `unknown-job-${i}-${'x'.repeat(40)}` } });
    let sent = 0;
    while (app.agentHub.get(agent.id) && sent < 400_000) {
      for (let i = 0; i < 2_000; i++) client.sendRaw(report(sent++));
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Dropped while it was still sending (so not as a silent peer: each frame counts as contact).
    expect({ online: app.agentHub.get(agent.id) !== undefined }).toEqual({ online: false });
    expect(sent).toBeLessThan(400_000);
    client.ws.terminate();
  }, 60_000);
});

describe('progress of a job', () => {
  test(`more than ${MAX_PENDING_FILES} file results arriving during one write wait for it (back-pressure): every one is recorded`, async () => {
    const account = await createAccount(app);
    const { client } = await connectedAgent(account.apiKey);
    const job = await makeTransfer(app, account.apiKey, (await makeConnection(app, account.apiKey, 'sftp')).id, (await makeConnection(app, account.apiKey, 's3')).id);
    expect((await transferAction(app, account.apiKey, job.id, 'execute', '?wait=false')).statusCode).toBe(202);
    await client.next('job.assign');
    client.send('job.accepted', { job_id: job.id });
    const batches = Math.ceil((MAX_PENDING_FILES * 2.5) / 1000);
    // All at once: they arrive while the first write is in flight and merge past the bound.
    for (let b = 0; b < batches; b++) client.send('job.progress', { job_id: job.id, ...counters(batches * 1000, (b + 1) * 1000, (b + 1) * 1000), listing_done: true, files: files(b * 1000, 1000) });
    client.send('job.completed', { job_id: job.id, ...counters(batches * 1000, batches * 1000, batches * 1000) });
    await eventually(async () => (await app.db.transfers.findById(job.id).lean())?.status === 'completed', 'job completed');
    expect(await app.db.transferFiles.countDocuments({ job_id: new Types.ObjectId(job.id) })).toBe(batches * 1000);
    client.close();
  });
});

import { Types } from 'mongoose';
import { CloseCodes, MAX_VERIFIED_QUERY_BYTES } from '@xfer/shared';
import type { App } from '../src/app.js';
import { buildTestApp, createAccount } from './helper.js';
import { counters, getTransfer, makeAgent, makeConnection, makeTransfer, sha, transferAction } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/**
 * The resume lookup (`job.verified.query` → `job.verified`), answered by a real control plane on a
 * real FerretDB to agents driven over a real WebSocket: what earlier attempts recorded copied, to
 * the agent running the job's current attempt only.
 */
let app: App;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200, jobLeaseMs: 2_000 });
  await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => app.close());

let requests = 0;
/** Sends a query and returns the answer's files, sorted by path. */
async function ask(client: ProtocolClient, jobId: string, paths: string[]) {
  const requestId = `q-${++requests}`;
  client.send('job.verified.query', { job_id: jobId, request_id: requestId, paths });
  for (;;) {
    const answer = await client.next('job.verified');
    if (answer.payload.request_id === requestId) return [...answer.payload.files].sort((a, b) => a.path.localeCompare(b.path));
  }
}

const copied = (n: number, size = 100) => ({ path: `d/f${n}`, status: 'copied' as const, size, sha256: sha(n), verified_by: 'sha256' });

/** A job on a connected agent, run as attempt 1 with these file results, failed, retried and assigned again as attempt 2. */
async function secondAttempt(results: Array<{ path: string; status: 'copied' | 'skipped' | 'failed'; size: number; sha256?: string }>) {
  const account = await createAccount(app);
  const agent = await makeAgent(app, account.apiKey);
  const { client, welcome } = await ProtocolClient.connect(app, agent.token);
  const src = await makeConnection(app, account.apiKey, 'sftp');
  const dst = await makeConnection(app, account.apiKey, 's3');
  const job = await makeTransfer(app, account.apiKey, src.id, dst.id);
  const key = account.apiKey;
  const run = async (attempt: number, files: typeof results) => {
    expect((await transferAction(app, key, job.id, 'execute', '?wait=false')).statusCode).toBe(202);
    expect((await client.next('job.assign')).payload).toMatchObject({ job_id: job.id, attempt, resume: attempt > 1 });
    client.send('job.accepted', { job_id: job.id });
    if (files.length > 0) client.send('job.progress', { job_id: job.id, ...counters(files.length, 0, 0), listing_done: true, files });
    return {
      fail: async () => {
        client.send('job.failed', { job_id: job.id, ...counters(files.length, 0, 0), error: 'killed' });
        await eventually(async () => (await getTransfer(app, key, job.id)).status === 'failed', `attempt ${attempt} failed`);
        expect((await transferAction(app, key, job.id, 'retry')).statusCode).toBe(200);
      },
    };
  };
  await (await run(1, results)).fail();
  await run(2, []);
  return { account, agent, client, welcome, job, key, src, dst, run };
}

test('answers the files earlier attempts recorded copied, the latest record each, never the current attempt\'s', async () => {
  const ctx = await secondAttempt([copied(0), copied(1), { path: 'd/f2', status: 'failed', size: 100 }, { path: 'd/f3', status: 'skipped', size: 100 }, { ...copied(4), sha256: undefined }]);
  expect(ctx.welcome.verified_lookup).toBe(true);
  expect(await ask(ctx.client, ctx.job.id, ['d/f0', 'd/f1', 'd/f2', 'd/f3', 'd/f4', 'd/nope', 'd/f0'])).toEqual([
    { path: 'd/f0', size: 100, sha256: sha(0), attempt: 1 },
    { path: 'd/f1', size: 100, sha256: sha(1), attempt: 1 },
    { path: 'd/f4', size: 100, attempt: 1 },
  ]);
  expect(await ask(ctx.client, ctx.job.id, [])).toEqual([]);

  // Attempt 2 copies f1 anew (the source changed) and f2: not visible to attempt 2 itself…
  ctx.client.send('job.progress', { job_id: ctx.job.id, ...counters(2, 2, 0), listing_done: true, files: [{ ...copied(11, 7), path: 'd/f1' }, copied(2)] });
  await eventually(async () => (await app.db.transferFiles.countDocuments({ job_id: new Types.ObjectId(ctx.job.id), attempt: 2 })) === 2, 'attempt 2 results stored');
  expect((await ask(ctx.client, ctx.job.id, ['d/f1', 'd/f2'])).map((f) => [f.path, f.attempt])).toEqual([['d/f1', 1]]);
  // …and to attempt 3 the latest copied record of each path counts.
  ctx.client.send('job.failed', { job_id: ctx.job.id, ...counters(2, 2, 0), error: 'killed again' });
  await eventually(async () => (await getTransfer(app, ctx.key, ctx.job.id)).status === 'failed', 'attempt 2 failed');
  expect((await transferAction(app, ctx.key, ctx.job.id, 'retry')).statusCode).toBe(200);
  await ctx.run(3, []);
  expect(await ask(ctx.client, ctx.job.id, ['d/f0', 'd/f1', 'd/f2'])).toEqual([
    { path: 'd/f0', size: 100, sha256: sha(0), attempt: 1 },
    { path: 'd/f1', size: 7, sha256: sha(11), attempt: 2 },
    { path: 'd/f2', size: 100, sha256: sha(2), attempt: 2 },
  ]);
  ctx.client.close();
});

test('another agent of the account, another account\'s agent, and the agent once the job ended get an empty answer; the session stays open', async () => {
  const ctx = await secondAttempt([copied(0), copied(1)]);
  expect(await ask(ctx.client, ctx.job.id, ['d/f0'])).toHaveLength(1);

  const sibling = await makeAgent(app, ctx.key);
  const { client: siblingClient } = await ProtocolClient.connect(app, sibling.token);
  expect(await ask(siblingClient, ctx.job.id, ['d/f0', 'd/f1'])).toEqual([]);

  const stranger = await createAccount(app);
  const strangerAgent = await makeAgent(app, stranger.apiKey);
  const { client: strangerClient } = await ProtocolClient.connect(app, strangerAgent.token);
  expect(await ask(strangerClient, ctx.job.id, ['d/f0', 'd/f1'])).toEqual([]);
  expect(await ask(strangerClient, 'not-an-id', ['d/f0'])).toEqual([]);
  expect(await ask(strangerClient, 'constructor', ['d/f0'])).toEqual([]);

  // The running agent, once its run ended, gets nothing either.
  ctx.client.send('job.completed', { job_id: ctx.job.id, ...counters(2, 0, 0, { files_skipped: 2 }) });
  await eventually(async () => (await getTransfer(app, ctx.key, ctx.job.id)).status === 'completed', 'attempt 2 completed');
  expect(await ask(ctx.client, ctx.job.id, ['d/f0', 'd/f1'])).toEqual([]);

  // Every session is still open and answers.
  for (const c of [ctx.client, siblingClient, strangerClient]) {
    c.send('pong', { request_id: 'unasked' });
    expect(c.ws.readyState).toBe(c.ws.OPEN);
    c.close();
  }
});

test('a query over the protocol\'s bounds closes the session with a protocol error', async () => {
  const account = await createAccount(app);
  const agent = await makeAgent(app, account.apiKey);
  const tooMany = (await ProtocolClient.connect(app, agent.token)).client;
  tooMany.send('job.verified.query', { job_id: 'x', request_id: 'r', paths: Array.from({ length: 1001 }, (_, i) => `p${i}`) });
  expect((await tooMany.closed).code).toBe(CloseCodes.protocolError);

  const tooLong = (await ProtocolClient.connect(app, agent.token)).client;
  const path = 'p'.repeat(4096);
  tooLong.send('job.verified.query', { job_id: 'x', request_id: 'r', paths: Array.from({ length: Math.ceil(MAX_VERIFIED_QUERY_BYTES / 4096) + 1 }, () => path) });
  expect(await tooLong.closed).toEqual({ code: CloseCodes.protocolError, reason: expect.stringContaining('job.verified.query') });
});

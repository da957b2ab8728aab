import type { App } from '../src/app.js';
import { buildTestApp, createAccount } from './helper.js';
import { counters, getTransfer, makeAgent, makeConnection, makeTransfer, sha, transferAction } from './fixtures.js';
import { eventually, ProtocolClient } from './protocol-client.js';

/**
 * A run its window or max_duration stopped (issue 25, docs/agent.md "Bandwidth limits and run
 * windows"): `job.failed` with `cutoff` fails the transfer saying so, with no takeover; a retry
 * clears it and the next run resumes from the files verified before.
 */
let app: App;

beforeAll(async () => {
  app = await buildTestApp({ dispatchPollMs: 50, agentHeartbeatMs: 200, jobLeaseMs: 2_000 });
  await app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(() => app.close());

async function setup() {
  const { apiKey: key } = await createAccount(app);
  const agent = await makeAgent(app, key);
  const { client } = await ProtocolClient.connect(app, agent.token);
  const src = await makeConnection(app, key, 'sftp');
  const dst = await makeConnection(app, key, 's3');
  const job = await makeTransfer(app, key, src.id, dst.id);
  return { key, client, job };
}

const files = (n: number) => Array.from({ length: n }, (_, i) => ({ path: `f${i}`, status: 'copied' as const, size: 10, sha256: sha(i), verified_by: 'sha256' }));
const CUT = 'run window 19:00–06:00 Europe/Berlin ended (hard cutoff): 3 of 5 files done; the next run resumes';

test('job.failed with cutoff: the transfer fails with cutoff and the error (no takeover); retry clears it and the next run resumes from the verified files', async () => {
  const { key, client, job } = await setup();
  await transferAction(app, key, job.id, 'execute', '?wait=false');
  expect((await client.next('job.assign')).payload).toMatchObject({ job_id: job.id, attempt: 1 });
  client.send('job.accepted', { job_id: job.id });
  client.send('job.progress', { job_id: job.id, ...counters(5, 3, 30), listing_done: true, files: files(3) });
  client.send('job.failed', { job_id: job.id, ...counters(5, 3, 30), error: CUT, cutoff: 'window' });
  const failed = await eventually(async () => {
    const t = await getTransfer(app, key, job.id);
    return t.status === 'failed' && t;
  }, 'failed with cutoff');
  expect(failed).toMatchObject({ status: 'failed', cutoff: 'window', error: CUT, attempt: 1, takeovers: 0, last_interruption: null, files_transferred: 3 });
  // The event says why too.
  const event = await eventually(() => app.db.outboxEvents.findOne({ 'data.id': job.id, type: 'transfer.failed' }).lean(), 'transfer.failed event');
  expect(event.data).toMatchObject({ id: job.id, status: 'failed', error: CUT, cutoff: 'window' });
  // Not taken over: no second run was sent.
  expect(client.all('job.assign')).toHaveLength(1);

  // Retry clears the cutoff; the next run resumes and sees what attempt 1 verified.
  expect((await transferAction(app, key, job.id, 'retry')).statusCode).toBe(200);
  expect(await getTransfer(app, key, job.id)).toMatchObject({ status: 'queued', cutoff: null, error: null, attempt: 2 });
  await transferAction(app, key, job.id, 'execute', '?wait=false');
  expect((await client.next('job.assign')).payload).toMatchObject({ job_id: job.id, attempt: 2, resume: true });
  client.send('job.accepted', { job_id: job.id });
  client.send('job.verified.query', { job_id: job.id, request_id: 'q1', paths: ['f0', 'f1', 'f2', 'f3', 'f4'] });
  expect((await client.next('job.verified')).payload.files.map((f) => f.path).sort()).toEqual(['f0', 'f1', 'f2']);
  client.send('job.completed', { job_id: job.id, ...counters(5, 2, 20, { files_skipped: 3 }) });
  const done = await eventually(async () => {
    const t = await getTransfer(app, key, job.id);
    return t.status === 'completed' && t;
  }, 'completed');
  expect(done).toMatchObject({ cutoff: null, error: null, files_skipped: 3, files_transferred: 2 });
  client.close();
});

test('a run ended at once outside its window (no job.accepted) fails with cutoff instead of being taken over as a refusal', async () => {
  const { key, client, job } = await setup();
  await transferAction(app, key, job.id, 'execute', '?wait=false');
  await client.next('job.assign');
  const error = 'started outside its run window 19:00–06:00 Europe/Berlin: the window opens next at 2026-11-29 19:00 Europe/Berlin (2026-11-29T18:00:00.000Z); nothing was copied';
  client.send('job.failed', { job_id: job.id, ...counters(0, 0, 0), error, cutoff: 'window' });
  const failed = await eventually(async () => {
    const t = await getTransfer(app, key, job.id);
    return t.status === 'failed' && t;
  }, 'failed with cutoff');
  expect(failed).toMatchObject({ cutoff: 'window', error, attempt: 1, takeovers: 0, last_interruption: null });
  client.close();
});

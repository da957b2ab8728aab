import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FileResult, JobOptions } from '@xfer/shared';
import { BandwidthTimetable } from '../src/copy/bandwidth.js';
import { assignPayload, testAgent } from './helpers/test-agent.js';
import { TestControlPlane, type AgentConnection } from './helpers/test-control-plane.js';
import { partFiles, rmTemp, snapshot, tempDir, writeTree } from './helpers/tree.js';

/**
 * Bandwidth limits and cutoffs through the real agent (issue 25, docs/agent.md "Bandwidth limits
 * and run windows"): real files on both sides, the job runner, the engine and its clean-up. The
 * limits make the runs slow enough for the cutoffs to land mid-run; nothing here asserts a time.
 */
let server: TestControlPlane;
let src: string;
let dst: string;
beforeEach(async () => {
  server = await TestControlPlane.start();
  src = tempDir('xfer-lsrc-');
  dst = tempDir('xfer-ldst-');
});
afterEach(async () => {
  await server.close();
  rmTemp(src);
  rmTemp(dst);
});

async function connected(overrides: Parameters<typeof testAgent>[1] = {}) {
  const { agent } = testAgent(server.connectUrl, overrides);
  const running = agent.run();
  const conn = await server.connection(0);
  await conn.welcome();
  return { agent, running, conn };
}

function fileResults(conn: AgentConnection, jobId: string): FileResult[] {
  return conn.all('job.progress').filter((m) => m.payload.job_id === jobId).flatMap((m) => m.payload.files);
}

const options = (o: Partial<JobOptions>): JobOptions => ({ overwrite: 'if_changed', verify: 'checksum', concurrency: 2, ...o });

/** Files under `root` (not the temporary ones). */
function finalFiles(root: string): string[] {
  return readdirSync(root).filter((n) => !n.endsWith('.part')).sort();
}

/** Each of `names` at the destination is byte for byte the source's. */
function expectComplete(names: string[]): void {
  for (const name of names) expect(readFileSync(join(dst, name)).equals(readFileSync(join(src, name)))).toBe(true);
}

const tree = (n: number, size: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${String(i).padStart(2, '0')}.bin`, Buffer.alloc(size, i + 1)]));

test('hard cutoff at max_duration under a bandwidth limit: failed with cutoff, no partial or temporary file, and the resume run completes the rest', async () => {
  // 10 × 50 kB at 100 kB/s: 5 s of work; at most ~210 kB can pass in 2 s, so the cutoff lands mid-run.
  writeTree(src, tree(10, 50_000));
  const { agent, running, conn } = await connected();
  conn.send('job.assign', assignPayload('job-h', src, dst, { options: options({ bandwidth_limit: 100_000, max_duration: 2 }) }));
  const failed = (await conn.next('job.failed')).payload;
  expect(failed.cutoff).toBe('max_duration');
  expect(failed.files_transferred).toBeLessThan(10);
  expect(failed.error).toMatch(new RegExp(`^max_duration of 2 s reached \\(hard cutoff\\): ${failed.files_transferred} (of ${failed.files_total} files done|files done of the ${failed.files_total} listed so far); the next run resumes$`));
  // Nothing half-written under any name: only complete files, as many as reported copied.
  expect(partFiles(dst)).toEqual([]);
  const copied = finalFiles(dst);
  expect(copied).toHaveLength(failed.files_transferred);
  expectComplete(copied);
  expect(fileResults(conn, 'job-h').filter((r) => r.status === 'copied').map((r) => r.path).sort()).toEqual(copied);

  // The next run (attempt 2, resume, no limit) does the rest.
  conn.send('job.assign', assignPayload('job-h', src, dst, { attempt: 2, resume: true, options: options({}) }));
  const done = (await conn.next('job.completed')).payload;
  expect(done).toMatchObject({ files_total: 10, files_skipped: copied.length, files_transferred: 10 - copied.length, files_failed: 0 });
  expect(snapshot(dst)).toEqual(snapshot(src));
  await agent.shutdown('test');
  await running;
});

test('soft cutoff: the running files finish, no new file starts, and the run fails with cutoff', async () => {
  // Two files at a time share 100 kB/s: the first two (100 kB each) need about 2 s, past the 1 s cutoff.
  writeTree(src, tree(6, 100_000));
  const { agent, running, conn } = await connected();
  conn.send('job.assign', assignPayload('job-s', src, dst, { options: options({ bandwidth_limit: 100_000, max_duration: 1, cutoff: 'soft', concurrency: 2 }) }));
  const failed = (await conn.next('job.failed')).payload;
  // The files running at the cutoff: two, unless a very busy machine let the second start only after it.
  const results = fileResults(conn, 'job-s');
  const started = results.length;
  expect(started).toBeGreaterThanOrEqual(1);
  expect(started).toBeLessThanOrEqual(2);
  expect(failed).toMatchObject({ cutoff: 'max_duration', files_transferred: started, files_failed: 0 });
  expect(failed.error).toMatch(new RegExp(`^max_duration of 1 s reached \\(soft cutoff: the running files finished\\): ${started} (of 6 files done|files done of the \\d+ listed so far); the next run resumes$`));
  // The started files finished, complete; no other was started.
  expect(results.every((r) => r.status === 'copied')).toBe(true);
  expect(finalFiles(dst)).toEqual(results.map((r) => r.path).sort());
  expectComplete(finalFiles(dst));
  expect(partFiles(dst)).toEqual([]);
  await agent.shutdown('test');
  await running;
});

test('a run started outside its window ends at once with cutoff window, saying when the window opens', async () => {
  writeTree(src, tree(2, 10));
  // A window starting two hours from now (UTC) is closed now, whatever the time.
  const now = new Date();
  const hhmm = (minutes: number) => `${String(Math.floor((minutes % 1440) / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;
  const minute = now.getUTCHours() * 60 + now.getUTCMinutes();
  const window = { start: hhmm(minute + 120), end: hhmm(minute + 180), tz: 'UTC' };
  const { agent, running, conn } = await connected();
  conn.send('job.assign', assignPayload('job-w', src, dst, { options: options({ window }) }));
  expect((await conn.next('job.accepted')).payload.job_id).toBe('job-w');
  const failed = (await conn.next('job.failed')).payload;
  expect(failed).toMatchObject({ cutoff: 'window', files_total: 0, files_transferred: 0 });
  expect(failed.error).toMatch(new RegExp(`^started outside its run window ${window.start}–${window.end} UTC: the window opens next at \\d{4}-\\d\\d-\\d\\d ${window.start} UTC \\(.+Z\\); nothing was copied$`));
  expect(readdirSync(dst)).toEqual([]);
  await agent.shutdown('test');
  await running;
});

test('the agent-wide --bwlimit paces a run that has no limit of its own (cut off by max_duration before it is done)', async () => {
  // 1 MB at 100 KiB/s is ~10 s; unpaced, a local copy takes milliseconds.
  writeTree(src, { 'big.bin': Buffer.alloc(1_000_000, 9) });
  const { agent, running, conn } = await connected({ bwlimit: BandwidthTimetable.parse('100k', 'UTC') });
  conn.send('job.assign', assignPayload('job-a', src, dst, { options: options({ max_duration: 1 }) }));
  const failed = (await conn.next('job.failed')).payload;
  expect(failed).toMatchObject({ cutoff: 'max_duration', files_transferred: 0 });
  expect(existsSync(join(dst, 'big.bin'))).toBe(false);
  expect(partFiles(dst)).toEqual([]);
  await agent.shutdown('test');
  await running;
});

test('a window in a zone this agent does not know fails the job, naming the option (the agent goes on)', async () => {
  writeTree(src, tree(1, 10));
  const { agent, running, conn } = await connected();
  conn.send('job.assign', assignPayload('job-z', src, dst, { options: options({ window: { start: '00:00', end: '23:59', tz: 'Mars/Olympus' } }) }));
  const failed = (await conn.next('job.failed')).payload;
  expect(failed).toMatchObject({ job_id: 'job-z', files_total: 0, error: 'options.window.tz: unknown time zone "Mars/Olympus" (an IANA zone such as Europe/Berlin)' });
  expect(failed.cutoff).toBeUndefined();
  // The next job runs.
  conn.send('job.assign', assignPayload('job-ok', src, dst));
  expect((await conn.next('job.completed')).payload).toMatchObject({ job_id: 'job-ok', files_transferred: 1 });
  await agent.shutdown('test');
  await running;
});

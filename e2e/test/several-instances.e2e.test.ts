import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { CreateBucketCommand, type S3Client } from '@aws-sdk/client-s3';
import { startStack, type Proc, type Stack } from '../src/stack.js';
import { agentLines, fileResults, instanceOf, sftpAndS3, waitFor } from './support/stack-helpers.js';
import { digestBucket, digestDir, openUploads, s3Client, treeDiff, writeTree, type Digests } from './support/trees.js';

/**
 * Several control planes with real agents (issue 14 item 4): three `xfer-server` instances over
 * one database, three `xfer-agent`s each given the three URLs, real sftp → s3 (and sftp → sftp)
 * transfers submitted round-robin to the three APIs. kill -9 of the instance holding a running
 * job's agent socket: the agent reconnects to another instance and the job carries on. kill -9 of
 * an agent mid-job: another agent takes the job over (failover). Every job ends `completed`,
 * byte-identical at the destination, with counters that add up and nothing partial left behind.
 */
const env = process.env;
const run = randomBytes(4).toString('hex');
const bucket = `e2e-instances-${run}`;
const sftpRoot = join(env.XFER_TEST_SFTP_ROOT!, `e2e-instances-${run}`);
const LEASE_MS = 6000;
/** Files per job: small ones (up to 40 KB) and one of 20 MiB (a multipart upload on s3), run with concurrency 2 for a few seconds. */
const FILES = 150;
const BIG_BYTES = 20 * 1024 * 1024;
let stack: Stack;
let s3: S3Client;
const ids = { sftp: '', s3: '' };
const agents: { id: string; proc: Proc }[] = [];

interface Job {
  id: string;
  /** The source tree's digests. */
  expected: Digests;
  /** Where it goes: a prefix of the bucket, or a directory below `sftpRoot`. */
  to: 's3' | 'sftp';
  dst: string;
}

beforeAll(async () => {
  s3 = s3Client(env);
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));
  stack = await startStack({
    env, instances: 3,
    serverEnv: { XFER_JOB_LEASE_MS: String(LEASE_MS), XFER_AGENT_HEARTBEAT_MS: '1000', XFER_DISPATCH_POLL_MS: '100' },
  });
  Object.assign(ids, await sftpAndS3(stack, 'instances', sftpRoot, bucket));
  for (let i = 0; i < 3; i++) agents.push(await stack.startAgent(`fleet-${i}`));
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  rmSync(sftpRoot, { recursive: true, force: true });
}, 60_000);

/** Writes the source trees and submits one job each, round-robin over the instances' APIs, without waiting. */
async function submit(name: string, count: number): Promise<Job[]> {
  const jobs: Job[] = [];
  for (let i = 0; i < count; i++) {
    const expected = await writeTree(join(sftpRoot, `${name}-src-${i}`), { count: FILES, bigBytes: BIG_BYTES });
    jobs.push({ id: '', expected, to: i % 3 === 2 ? 'sftp' : 's3', dst: `${name}-dst-${i}` });
  }
  spawnSync('chown', ['-R', `${env.XFER_TEST_SFTP_USER}:`, sftpRoot]);
  for (const [i, job] of jobs.entries()) {
    const api = stack.apis[i % stack.apis.length]!;
    const created = await api.data('POST', '/transfers', {
      name: `${name} ${i}`, sourceConnectionId: ids.sftp, sourcePath: `/${name}-src-${i}`,
      destinationConnectionId: job.to === 's3' ? ids.s3 : ids.sftp, destinationPath: `/${job.dst}`, options: { concurrency: 2 },
    });
    job.id = created.id as string;
    const executed = await api.call('POST', `/transfers/${job.id}/execute?wait=false`);
    expect([job.id, executed.status]).toEqual([job.id, 202]);
  }
  return jobs;
}

const get = (id: string) => stack.liveApi().data('GET', `/transfers/${id}`);

/** A job caught running with part of its files done: the one to break. */
async function runningJob(jobs: Job[]): Promise<{ job: Job; view: any }> {
  const found = await waitFor('a job running with some files done', async () => {
    for (const job of jobs) {
      const view = await get(job.id);
      if (view.status === 'in-progress' && view.files_transferred >= 5 && view.files_transferred <= FILES / 2) return { job, view };
    }
    return null;
  }, (x) => x !== null, 120_000);
  return found!;
}

/** Waits for every job to end, then checks each one: completed, counters, bytes at the destination, nothing partial. */
async function checkAll(jobs: Job[]): Promise<Map<string, any>> {
  const views = new Map<string, any>();
  for (const job of jobs) {
    const view = await waitFor(`job ${job.id} to end`, () => get(job.id), (j) => !['queued', 'in-progress'].includes(j.status), 180_000);
    views.set(job.id, view);
    expect(view).toMatchObject({ id: job.id, status: 'completed', error: null, files_total: job.expected.size, files_failed: 0 });
    expect(view.files_transferred + view.files_skipped).toBe(view.files_total);
    // The counters are the final attempt's: its per-file results add up to them.
    const results = [...(await fileResults(stack.liveApi(), job.id, view.attempt as number)).values()];
    const copied = results.filter((f) => f.status === 'copied');
    expect(copied.length).toBe(view.files_transferred);
    expect(results.filter((f) => f.status === 'skipped').length).toBe(view.files_skipped);
    expect(copied.reduce((sum, f) => sum + f.size, 0)).toBe(view.bytes_transferred);
    const actual = job.to === 's3' ? (await digestBucket(s3, bucket, job.dst)).files : (await digestDir(join(sftpRoot, job.dst))).files;
    expect(treeDiff(job.expected, actual)).toEqual([]);
    if (job.to === 'sftp') expect(partFiles(join(sftpRoot, job.dst))).toEqual([]);
  }
  expect(await openUploads(s3, bucket)).toBe(0);
  return views;
}

/** Temporary `.part` files below `dir` on the raw sftp server's disk. */
function partFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((p) => p.endsWith('.part'));
}

test('kill -9 of the instance holding a running job\'s agent socket: the agent moves to another instance and every job completes, byte-identical', async () => {
  // The agents spread over the instances (each starts at a random URL); the jobs go to all three APIs.
  const jobs = await submit('inst', 6);
  const { job, view } = await runningJob(jobs);
  const agent = agents.find((a) => a.id === view.agent_id)!;
  const holder = instanceOf(stack, agent.proc);
  expect(holder.index).toBeGreaterThanOrEqual(0);

  await stack.killServer(holder.index);
  const killedAt = Date.now();
  const moved = await waitFor('the agent to reconnect to another instance', async () => instanceOf(stack, agent.proc), (i) => i.at > killedAt, 30_000);
  expect(moved.index).not.toBe(holder.index);

  const views = await checkAll(jobs);
  // The job carried on in the same run (no retry, no takeover), finished by the agent after the kill.
  expect(views.get(job.id)).toMatchObject({ attempt: 1, agent_id: agent.id });
  const ends = agentLines(agent.proc).filter((l) => l.msg === 'job completed' && l.job_id === job.id);
  expect(ends).toHaveLength(1);
  expect(Date.parse(ends[0]!.time as string)).toBeGreaterThan(killedAt);

  // The killed instance comes back on its port and database, and serves the API again.
  await stack.restartServer(holder.index);
  expect(await stack.apis[holder.index]!.data('GET', `/transfers/${job.id}`)).toMatchObject({ status: 'completed' });
}, 300_000);

test('kill -9 of an agent mid-job: another agent takes the job over (attempts: 2, no manual retry) and every job completes, byte-identical', async () => {
  const jobs = await submit('agent', 3);
  const { job, view } = await runningJob(jobs);
  const victim = agents.find((a) => a.id === view.agent_id)!;
  victim.proc.child.kill('SIGKILL');
  await victim.proc.exited;
  // The jobs the victim was running when it died: every one of them must be taken over.
  const theirs: string[] = [];
  for (const j of jobs) {
    const now = await get(j.id);
    if (now.agent_id === victim.id && now.status === 'in-progress') theirs.push(j.id);
  }

  const views = await checkAll(jobs);
  expect(theirs).toContain(job.id);
  for (const id of theirs) {
    const taken = views.get(id);
    expect(taken).toMatchObject({ status: 'completed', attempts: 2 });
    expect(taken.agent_id).not.toBe(victim.id);
  }
}, 300_000);

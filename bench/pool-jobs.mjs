#!/usr/bin/env node
// Many jobs at once on a pool of agents: xfer's queue against rclone runs with the same parallelism.
//
//   npm run build && node bench/pool-jobs.mjs [--jobs 50] [--agents 3] [--max-jobs 4] [--files 20] [--kib 64]
//
// --agents real agents labelled `bench-pool` (each running --max-jobs jobs at once) and one real
// control plane; --jobs transfers of the same sftp tree (--files files of --kib KiB) to prefixes
// of their own on s3, naming the pool (`agent_pool`, where the control plane has pools; any agent
// of the account otherwise), all executed at once (`?wait=false`) and followed to their end.
// Prints how many completed and failed, the total time, each job's time from the submission to
// its end (median, 95th percentile, max), how the jobs spread over the agents, and the baseline:
// the same copies made by `rclone copy`, agents × max-jobs of them at a time. Figures, not asserts:
// every object is counted on the S3 server.
import { parseArgs } from 'node:util';
import { join } from 'node:path';
import { startStack } from '../e2e/dist/stack.js';
import { load, log, sftpToS3, writeSmallFiles } from './support/sftp-s3.mjs';

const { values: args } = parseArgs({
  options: {
    jobs: { type: 'string', default: '50' },
    agents: { type: 'string', default: '3' },
    'max-jobs': { type: 'string', default: '4' },
    files: { type: 'string', default: '20' },
    kib: { type: 'string', default: '64' },
  },
});
const JOBS = Number(args.jobs);
const AGENTS = Number(args.agents);
const MAX_JOBS = Number(args['max-jobs']);
const FILES = Number(args.files);
const BYTES = Number(args.kib) * 1024;
const POOL = 'bench-pool';

const bench = await sftpToS3('bench-pool');
const loadBefore = load();
writeSmallFiles(join(bench.srcRoot, 'src'), FILES, BYTES);

const stack = await startStack({ env: bench.env, serverEnv: { XFER_DISPATCH_POLL_MS: '100' } });
try {
  const api = stack.api;
  const agents = [];
  for (let i = 0; i < AGENTS; i++) {
    const created = await api.data('POST', '/agents', { name: `bench-pool-${i}`, labels: [POOL] });
    stack.spawnAgent(created.token, {}, ['--max-jobs', String(MAX_JOBS)]);
    agents.push(created.id);
  }
  for (const id of agents) await stack.waitForAgent(id, 'online');

  // The pool where the control plane has pools (issue 14); else any agent of the account, which here are the same three.
  let conns;
  let pooled;
  try {
    conns = await bench.connections(api, { agent_pool: POOL });
    pooled = (await api.data('GET', `/connections/${conns.s3}`)).agent_pool === POOL;
  } catch (err) {
    if (!/agent_pool/.test(err.message)) throw err;
    conns = await bench.connections(api);
    pooled = false;
  }

  const ids = [];
  for (let i = 0; i < JOBS; i++) {
    const job = await api.data('POST', '/transfers', {
      name: `bench pool ${i}`, sourceConnectionId: conns.sftp, sourcePath: '/src',
      destinationConnectionId: conns.s3, destinationPath: `/xfer-${i}`, options: { concurrency: 4, overwrite: 'always' },
    });
    ids.push(job.id);
  }

  log(`xfer: ${JOBS} jobs at once on ${AGENTS} agents × ${MAX_JOBS}`);
  const t0 = Date.now();
  const submitted = await Promise.all(ids.map((id) => api.call('POST', `/transfers/${id}/execute?wait=false`)));
  const refused = submitted.filter((r) => r.status !== 202);
  let maxQueued = 0;
  let views;
  const ours = new Set(ids);
  for (;;) {
    // One list request per look (the account has only these transfers), not one read per job.
    views = (await api.data('GET', `/transfers?limit=${Math.min(1000, JOBS)}`)).filter((v) => ours.has(v.id));
    if (views.length !== JOBS) throw new Error(`listed ${views.length} of the ${JOBS} transfers`);
    maxQueued = Math.max(maxQueued, views.filter((v) => v.status === 'queued').length);
    if (views.every((v) => !['queued', 'in-progress'].includes(v.status))) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const xferSeconds = (Math.max(...views.map((v) => Date.parse(v.completed_at ?? v.updated_at))) - t0) / 1000;
  const completed = views.filter((v) => v.status === 'completed');
  const failed = views.filter((v) => v.status !== 'completed');
  const perJob = views.map((v) => (Date.parse(v.completed_at ?? v.updated_at) - t0) / 1000).sort((a, b) => a - b);
  const byAgent = new Map();
  for (const v of completed) byAgent.set(v.agent_id, (byAgent.get(v.agent_id) ?? 0) + 1);
  let copied = 0;
  for (const [i, id] of ids.entries()) if (views.find((v) => v.id === id).status === 'completed') copied += (await bench.countObjects(`xfer-${i}/`)).files;
  log(`xfer: ${xferSeconds.toFixed(1)} s`);

  // Baseline: the same copies by rclone, as many at a time as the pool has slots.
  log(`rclone: ${JOBS} copies, ${AGENTS * MAX_JOBS} at a time`);
  const r0 = Date.now();
  let next = 0;
  await Promise.all(Array.from({ length: AGENTS * MAX_JOBS }, async () => {
    while (next < JOBS) await bench.rcloneCopy('src', `rclone-${next++}`, 4);
  }));
  const rcloneSeconds = (Date.now() - r0) / 1000;
  let rcloneCopied = 0;
  for (let i = 0; i < JOBS; i++) rcloneCopied += (await bench.countObjects(`rclone-${i}/`)).files;
  log(`rclone: ${rcloneSeconds.toFixed(1)} s`);

  const q = (p) => perJob[Math.min(perJob.length - 1, Math.floor(p * perJob.length))];
  console.log(`\n${JOBS} jobs (${FILES} × ${BYTES / 1024} KiB each, sftp → s3) submitted at once to ${AGENTS} agents × max_jobs ${MAX_JOBS}` +
    `${pooled ? ` (connections on pool "${POOL}")` : ' (this control plane has no pools: connections on any agent of the account)'}, ${bench.rcloneVersion()}`);
  console.log(`load average before: ${loadBefore}; after: ${load()}`);
  console.log(`completed ${completed.length} / ${JOBS}, failed ${failed.length}${refused.length ? `, execute refused ${refused.length} (${refused[0].status} ${JSON.stringify(refused[0].body)})` : ''}` +
    `${failed.length ? `; first failure: ${failed[0].error}` : ''}   (target: all complete, none failed)`);
  console.log(`objects copied: xfer ${copied} / ${completed.length * FILES}, rclone ${rcloneCopied} / ${JOBS * FILES}`);
  console.log(`total time: xfer ${xferSeconds.toFixed(1)} s, rclone ${rcloneSeconds.toFixed(1)} s (${AGENTS * MAX_JOBS} at a time): rclone/xfer ${(rcloneSeconds / xferSeconds).toFixed(2)}×`);
  console.log(`per job, submission to end: median ${q(0.5).toFixed(1)} s, p95 ${q(0.95).toFixed(1)} s, max ${perJob.at(-1).toFixed(1)} s; most waiting at once: ${maxQueued}`);
  console.log(`jobs per agent: ${[...byAgent.values()].join(' / ')}`);
} finally {
  await stack.stop();
  await bench.close();
}

#!/usr/bin/env node
// Many files in one job: xfer against rclone, sftp → s3, on the same real servers in one run.
//
//   npm run build && node bench/many-files.mjs [--files 100000] [--kib 4] [--per-dir 1000] [--concurrency 16] [--xfer-only] [--cpu-prof DIR]
//
// One transfer of --files files of --kib KiB (in directories of --per-dir), created and executed
// through the API of the real control plane and run by the real agent, then `rclone copy` of the
// same tree to another prefix of the same bucket. Prints both wall times and their ratio, and the
// agent's and the control plane's peak RSS (VmHWM) and CPU seconds, beside the targets of issue 14
// (RSS ≤ 250 MiB each; xfer not slower than rclone). Figures, not asserts: both copies are
// counted on the S3 server, and the transfer's counters and stored per-file results checked.
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { MongoClient, ObjectId } from 'mongodb';
import { startStack } from '../e2e/dist/stack.js';
import { cpuSeconds, load, log, peakRssMiB, rssMiB, sftpToS3, writeSmallFiles } from './support/sftp-s3.mjs';

const { values: args } = parseArgs({
  options: {
    files: { type: 'string', default: '100000' },
    kib: { type: 'string', default: '4' },
    'per-dir': { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '16' },
    // Only xfer (no rclone, no ratio): to look at how xfer's figures grow with the file count.
    'xfer-only': { type: 'boolean', default: false },
    // A directory: the control plane and the agent write V8 CPU profiles there (bench/cpu-prof.cjs).
    'cpu-prof': { type: 'string' },
  },
});
const FILES = Number(args.files);
const BYTES = Number(args.kib) * 1024;
const CONCURRENCY = Number(args.concurrency);
const TARGET_RSS_MIB = 250;

const bench = await sftpToS3('bench-many');
const loadBefore = load();
log(`writing ${FILES} × ${BYTES} B under ${bench.srcRoot} (load ${loadBefore})`);
writeSmallFiles(join(bench.srcRoot, 'tree'), FILES, BYTES, Number(args['per-dir']));

const stack = await startStack({ env: {
  ...bench.env,
  ...(args['cpu-prof'] ? { NODE_OPTIONS: `--require ${new URL('./cpu-prof.cjs', import.meta.url).pathname}`, XFER_BENCH_CPU_PROF_DIR: args['cpu-prof'] } : {}),
} });
const client = await MongoClient.connect(bench.env.MONGODB_URI);
const db = client.db(stack.serverEnv.XFER_DB_NAME);
try {
  const agent = await stack.startAgent('bench-many');
  const api = stack.api;
  const conns = await bench.connections(api);
  const job = await api.data('POST', '/transfers', {
    name: 'bench many files', sourceConnectionId: conns.sftp, sourcePath: '/tree',
    destinationConnectionId: conns.s3, destinationPath: '/xfer', options: { concurrency: CONCURRENCY, overwrite: 'always' },
  });
  const pids = { agent: agent.proc.child.pid, server: stack.server.child.pid };
  const cpu0 = { agent: cpuSeconds(pids.agent), server: cpuSeconds(pids.server) };
  log(`xfer: ${FILES} files`);
  // Not the blocking execute: a run of minutes would outlast fetch's 5-minute wait for headers.
  // The transfer is read every 100 ms instead, and both processes' RSS (VmRSS) every second.
  const t0 = process.hrtime.bigint();
  const started = await api.call('POST', `/transfers/${job.id}/execute?wait=false`);
  if (started.status !== 202) throw new Error(`execute: ${started.status} ${JSON.stringify(started.body)}`);
  const samples = [];
  let lastSample = 0;
  let view;
  for (;;) {
    view = await api.data('GET', `/transfers/${job.id}`);
    if (!['queued', 'in-progress'].includes(view.status)) break;
    if (Date.now() - lastSample >= 1000) {
      lastSample = Date.now();
      samples.push({ files: view.files_transferred, agent: rssMiB(pids.agent), server: rssMiB(pids.server) });
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const xferSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
  if (view.status !== 'completed') throw new Error(`xfer failed: ${JSON.stringify(view)}`);
  const cpu = { agent: cpuSeconds(pids.agent) - cpu0.agent, server: cpuSeconds(pids.server) - cpu0.server };
  const rss = { agent: peakRssMiB(pids.agent), server: peakRssMiB(pids.server) };
  log(`xfer: ${xferSeconds.toFixed(1)} s`);

  // Everything the job says it did is at the destination and in the stored per-file results.
  const copied = await bench.countObjects('xfer/');
  if (view.files_transferred !== FILES || view.files_total !== FILES || view.bytes_transferred !== FILES * BYTES) {
    throw new Error(`xfer counters: ${JSON.stringify(view)}`);
  }
  if (copied.files !== FILES || copied.bytes !== FILES * BYTES) throw new Error(`xfer copied ${copied.files} files / ${copied.bytes} B`);
  // Counted in the database: paging them all through the API costs a scan of the collection per
  // page on FerretDB (docs/architecture.md "FerretDB and query pushdown"); one page is timed below.
  const results = await db.collection('transfer_files').countDocuments({ job_id: new ObjectId(job.id) });
  if (results !== FILES) throw new Error(`${results} per-file results stored, expected ${FILES}`);
  const page0 = process.hrtime.bigint();
  const firstPage = await api.call('GET', `/transfers/${job.id}/files?limit=1000`);
  const pageSeconds = Number(process.hrtime.bigint() - page0) / 1e9;

  let rcloneSeconds = NaN;
  if (!args['xfer-only']) {
    log(`rclone: ${FILES} files`);
    rcloneSeconds = await bench.rcloneCopy('tree', 'rclone', CONCURRENCY);
    const rcloneCopied = await bench.countObjects('rclone/');
    if (rcloneCopied.files !== FILES || rcloneCopied.bytes !== FILES * BYTES) throw new Error(`rclone copied ${rcloneCopied.files} files / ${rcloneCopied.bytes} B`);
    log(`rclone: ${rcloneSeconds.toFixed(1)} s`);
  }

  const mark = (ok) => (ok ? 'met' : 'MISSED');
  const ratio = rcloneSeconds / xferSeconds;
  console.log(`\n${FILES} files × ${BYTES / 1024} KiB in one job, sftp → s3 (OpenSSH sshd, versitygw) on loopback, concurrency ${CONCURRENCY}, ${bench.rcloneVersion()}`);
  console.log(`load average before: ${loadBefore}; after: ${load()}`);
  console.log('figure                        | value        | target');
  console.log(`xfer wall time                | ${xferSeconds.toFixed(1).padStart(8)} s   | (${(FILES / xferSeconds).toFixed(0)} files/s)`);
  if (!args['xfer-only']) {
    console.log(`rclone wall time              | ${rcloneSeconds.toFixed(1).padStart(8)} s   | (${(FILES / rcloneSeconds).toFixed(0)} files/s)`);
    console.log(`xfer speed / rclone (rc/xfer) | ${ratio.toFixed(2).padStart(8)} ×   | ≥ 1.00×: ${mark(ratio >= 1)}`);
  }
  console.log(`agent peak RSS (VmHWM)        | ${rss.agent.toFixed(0).padStart(8)} MiB | ≤ ${TARGET_RSS_MIB} MiB: ${mark(rss.agent <= TARGET_RSS_MIB)}`);
  console.log(`control plane peak RSS        | ${rss.server.toFixed(0).padStart(8)} MiB | ≤ ${TARGET_RSS_MIB} MiB: ${mark(rss.server <= TARGET_RSS_MIB)}`);
  console.log(`agent CPU during the job      | ${cpu.agent.toFixed(1).padStart(8)} s   |`);
  console.log(`per-file results stored: ${results}; GET /transfers/:id/files?limit=1000 answered ${firstPage.status} in ${pageSeconds.toFixed(1)} s`);
  // Memory that grows with the number of files shows as a climb from the first sample to the last.
  const picked = [0, 0.25, 0.5, 0.75, 1].map((q) => samples[Math.round(q * (samples.length - 1))]).filter(Boolean);
  console.log(`RSS during the job (files done: agent / control plane MiB): ${picked.map((x) => `${x.files}: ${x.agent.toFixed(0)} / ${x.server.toFixed(0)}`).join(', ')}`);
  console.log(`control plane CPU during it   | ${cpu.server.toFixed(1).padStart(8)} s   |`);
} finally {
  await stack.stop();
  // The run's database holds a document per file: not left on a shared test server.
  await db.dropDatabase().catch((err) => log(`could not drop ${db.databaseName}: ${err.message}`));
  await client.close();
  await bench.close();
}

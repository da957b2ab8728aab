#!/usr/bin/env node
// Sync benchmark (issue 25 "Acceptance"): xfer `sync` against `rclone sync`, sftp → s3, on the
// same real servers in one run, then a 1,000,000-entry comparison.
//
//   npm run build && node bench/sync-vs-rclone.mjs [--files 100000] [--list-files 1000000] [--concurrency 16] [--skip-sync] [--skip-list]
//
// (1) `--files` small files (1 KiB) on the test sshd. Each tool syncs the tree into its own prefix
//     of a fresh bucket (first full sync, timed for the record), then 1% of the source files are
//     rewritten (another size, a newer mtime) and 1% deleted, and the measured run follows: xfer
//     (control plane + agent binaries, a transfer with `options.mode: "sync"` executed through the
//     API) and `rclone sync` (the command is printed). Both compare by size and modification time,
//     their default. rclone reads the kept mtime of an object whose size matches with a HEAD;
//     xfer's agent knows the objects it wrote from its index of kept times (a fresh process on the
//     same state directory: connectors/kept-times.ts) and HEADs only the others. A last row runs
//     both again on unchanged trees, xfer with an empty state directory (every object HEADed, as
//     rclone). Figures: wall time of each, the
//     ratio, the peak RSS of a fresh agent over the measured run (VmHWM; the first sync's apart),
//     and the CPU seconds each process used during xfer's measured run.
//     Targets: xfer ≥ 1.5× rclone's speed, agent peak RSS ≤ 250 MiB.
// (2) `--list-files` tiny files in a local directory, read through the nfs connector's mounted
//     mode (options.mount_path: the fs connector, so the listing, not a server, is measured), and
//     synced to a destination that already equals it: the same directory through a second
//     connection, so only the listings and the comparison run and nothing is written (checked).
//     Figures: wall time, a fresh agent's peak RSS. Target: ≤ 300 MiB. (Creating the million names
//     takes about 15 s here: hard links, see below.)
// Figures, not asserts: the script prints each target as met or missed.
import { spawn } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, rmSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startStack, stopProc } from '../e2e/dist/stack.js';
import { cpuBetween, cpuSnapshot, load, log, peakRssMiB, rssMiB, sftpToS3, writeSmallFiles } from './support/sftp-s3.mjs';

const { values: args } = parseArgs({
  options: {
    files: { type: 'string', default: '100000' },
    'list-files': { type: 'string', default: '1000000' },
    concurrency: { type: 'string', default: '16' },
    'skip-list': { type: 'boolean', default: false },
    'skip-sync': { type: 'boolean', default: false },
  },
});
const FILES = Number(args.files);
const LIST_FILES = Number(args['list-files']);
const CONCURRENCY = Number(args.concurrency);
const FILE_BYTES = 1024;
const PER_DIR = 1000;
const TARGETS = { ratio: 1.5, syncRssMiB: 250, listRssMiB: 300 };

const seconds = (t0) => Number(process.hrtime.bigint() - t0) / 1e9;
const verdict = (ok) => (ok ? 'met' : 'MISSED');

/**
 * Peak RSS of a process over a stretch of work: VmHWM reset first (writing 5 to clear_refs, Linux
 * ≥ 4.0), and VmRSS sampled every 100 ms as a floor where the reset is refused.
 */
function rssWatch(pid) {
  let reset = true;
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    reset = false;
  }
  let sampled = rssMiB(pid);
  const timer = setInterval(() => {
    try {
      sampled = Math.max(sampled, rssMiB(pid));
    } catch {
      // exited
    }
  }, 100);
  return () => {
    clearInterval(timer);
    return Math.max(sampled, reset ? peakRssMiB(pid) : 0);
  };
}

/** A sync transfer through the API, executed to its end; resolves with its seconds and the job. */
async function xferSync(api, body) {
  const job = await api.data('POST', '/transfers', { ...body, options: { mode: 'sync', concurrency: CONCURRENCY, ...body.options } });
  const t0 = process.hrtime.bigint();
  const done = await api.call('POST', `/transfers/${job.id}/execute`);
  const took = seconds(t0);
  if (done.status !== 200 || !done.body.success) throw new Error(`xfer sync failed: ${done.status} ${JSON.stringify(done.body)}`);
  return { seconds: took, job: await api.data('GET', `/transfers/${job.id}`) };
}

/** Runs rclone to its end; resolves with its seconds. */
async function timed(rclone, argv, env) {
  const t0 = process.hrtime.bigint();
  const child = spawn(rclone, argv, { env, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-10_000); });
  const code = await new Promise((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`rclone ${argv.join(' ')} failed (${code}): ${stderr}`);
  return seconds(t0);
}

const results = {};
const bench = await sftpToS3('syncbench');
const { env: e, srcRoot, bucket } = bench;
const stack = await startStack({ env: e });
const tmpRoots = [];

/** (1): both tools' first full sync, 1% changed and 1% deleted, the measured runs. */
async function measureSync() {
  log(`writing ${FILES} × ${FILE_BYTES} B under ${srcRoot}/tree (${PER_DIR} a directory)`);
  const t0 = process.hrtime.bigint();
  writeSmallFiles(join(srcRoot, 'tree'), FILES, FILE_BYTES, PER_DIR);
  // Older than anything written later, whatever the clock's resolution on either side.
  const hourAgo = new Date(Date.now() - 3_600_000);
  for (let i = 0; i < FILES; i++) utimesSync(join(srcRoot, 'tree', `d${Math.floor(i / PER_DIR)}`, `f${i}.bin`), hourAgo, hourAgo);
  log(`written in ${seconds(t0).toFixed(1)} s`);

  // The agents of the measured runs keep their state (the index of kept times) here.
  const state = mkdtempSync(join(tmpdir(), 'syncbench-state-'));
  tmpRoots.push(state);
  agent = await stack.startAgent('syncbench', {}, ['--state-dir', state]);
  const conns = await bench.connections(stack.api);
  const transfer = (prefix) => ({ name: `sync bench ${prefix}`, sourceConnectionId: conns.sftp, sourcePath: '/tree', destinationConnectionId: conns.s3, destinationPath: `/${prefix}` });

  // rclone with the same meaning as xfer's sync: default comparison (size, then modification
  // time); S3 keeps rclone's mtime in object metadata, which rclone reads with one HEAD per object
  // whose size matches (its documented behaviour; --use-server-modtime or --size-only would skip
  // it, at the cost of a weaker comparison than xfer's). --fast-list: one recursive listing, as
  // xfer lists S3. Same concurrency as xfer (--transfers), twice as many checkers (rclone's ratio).
  const rcloneSync = ['sync', `src:${join(srcRoot, 'tree')}`, `dst:${bucket}/rclone`, '--transfers', String(CONCURRENCY),
    '--checkers', String(CONCURRENCY * 2), '--fast-list', '--s3-no-check-bucket'];
  const rcloneEnv = bench.rcloneEnv;

  log('first full sync: xfer');
  const xferFirst = await xferSync(stack.api, transfer('xfer'));
  log(`first full sync: xfer ${xferFirst.seconds.toFixed(1)} s; rclone`);
  const rcloneFirst = await timed(bench.rclone, rcloneSync, rcloneEnv);
  log(`first full sync: rclone ${rcloneFirst.toFixed(1)} s`);
  for (const prefix of ['xfer/', 'rclone/']) {
    const c = await bench.countObjects(prefix);
    if (c.files !== FILES) throw new Error(`${prefix}: ${c.files} objects after the first sync, expected ${FILES}`);
  }

  // 1% rewritten (size + 1, mtime now) and another 1% deleted, spread over the tree.
  const onePercent = Math.max(1, Math.floor(FILES / 100));
  const step = Math.floor(FILES / (2 * onePercent));
  for (let k = 0; k < 2 * onePercent; k++) {
    const i = k * step;
    const path = join(srcRoot, 'tree', `d${Math.floor(i / PER_DIR)}`, `f${i}.bin`);
    if (k % 2 === 0) writeFileSync(path, randomBytes(FILE_BYTES + 1));
    else unlinkSync(path);
  }
  log(`${onePercent} files changed and ${onePercent} deleted at the source; measured runs (load ${load()})`);

  // A fresh agent for the measured run, as rclone starts fresh: its peak is the sync's own (an
  // allocator keeps what the first full sync took), and no session is warm; on the same state
  // directory, as a restarted agent is.
  const firstRss = peakRssMiB(agent.proc.child.pid);
  await stopProc(agent.proc);
  agent = await stack.startAgent('syncbench-measured', {}, ['--state-dir', state]);
  const stopWatch = rssWatch(agent.proc.child.pid);
  const cpuBefore = cpuSnapshot();
  const xferRun = await xferSync(stack.api, transfer('xfer'));
  const cpu = cpuBetween(cpuBefore, cpuSnapshot(), { [agent.proc.child.pid]: 'xfer-agent', [stack.server.child.pid]: 'xfer-server' });
  const syncRss = stopWatch();
  log(`measured: xfer ${xferRun.seconds.toFixed(2)} s (${xferRun.job.files_transferred} copied, ${xferRun.job.files_deleted} deleted)`);
  const rcloneRun = await timed(bench.rclone, rcloneSync, rcloneEnv);
  log(`measured: rclone ${rcloneRun.toFixed(2)} s`);
  const expectFiles = FILES - onePercent;
  for (const prefix of ['xfer/', 'rclone/']) {
    const c = await bench.countObjects(prefix);
    if (c.files !== expectFiles || c.bytes !== expectFiles * FILE_BYTES + onePercent) {
      throw new Error(`${prefix}: ${c.files} objects / ${c.bytes} B after the measured sync, expected ${expectFiles} / ${expectFiles * FILE_BYTES + onePercent}`);
    }
  }
  if (xferRun.job.files_transferred !== onePercent || xferRun.job.files_deleted !== onePercent) {
    throw new Error(`xfer's measured run copied ${xferRun.job.files_transferred} and deleted ${xferRun.job.files_deleted}, expected ${onePercent} each`);
  }
  // Once more with nothing changed, xfer's agent given an empty state directory: no index of kept
  // times (connectors/kept-times.ts), so it HEADs every object as rclone does. For the record: what
  // the index saves, and where xfer stands without it.
  await stopProc(agent.proc);
  const emptyState = mkdtempSync(join(tmpdir(), 'syncbench-state-'));
  tmpRoots.push(emptyState);
  agent = await stack.startAgent('syncbench-cold', {}, ['--state-dir', emptyState]);
  const xferCold = await xferSync(stack.api, transfer('xfer'));
  const rcloneCold = await timed(bench.rclone, rcloneSync, rcloneEnv);
  if (xferCold.job.files_transferred !== 0 || (xferCold.job.files_deleted ?? 0) !== 0) throw new Error(`xfer's unchanged run wrote: ${JSON.stringify(xferCold.job)}`);
  log(`unchanged, empty index: xfer ${xferCold.seconds.toFixed(2)} s, rclone ${rcloneCold.toFixed(2)} s`);
  rmSync(join(srcRoot, 'tree'), { recursive: true, force: true });
  return {
    xferFirst: xferFirst.seconds, rcloneFirst, xfer: xferRun.seconds, rclone: rcloneRun, xferCold: xferCold.seconds, rcloneCold,
    rss: syncRss, firstRss, cpu: cpu.slice(0, 6), changed: onePercent, command: `rclone ${rcloneSync.join(' ')}`,
  };
}

let agent;
try {
  // ---- (1) FILES small files, 1% changed, 1% deleted, sftp → s3 ----
  if (!args['skip-sync']) results.sync = await measureSync();

  // ---- (2) a LIST_FILES-entry comparison, nothing to do ----
  if (!args['skip-list']) {
    const root = mkdtempSync(join(tmpdir(), 'syncbench-list-'));
    tmpRoots.push(root);
    log(`making ${LIST_FILES} tiny files under ${root}/tree`);
    const t0 = process.hrtime.bigint();
    // One 1-byte file a directory and hard links to it for the other names (one system call
    // each, 5× faster than writing a file here): a listing costs per name, whatever the inode.
    let first = '';
    for (let i = 0; i < LIST_FILES; i++) {
      const dir = join(root, 'tree', `d${Math.floor(i / PER_DIR)}`);
      const file = join(dir, `f${i}.bin`);
      if (i % PER_DIR === 0) {
        mkdirSync(dir, { recursive: true });
        writeFileSync(file, 'x');
        first = file;
      } else linkSync(first, file);
    }
    const created = seconds(t0);
    log(`written in ${created.toFixed(1)} s`);
    const mtimeBefore = statSync(join(root, 'tree', 'd0', 'f0.bin')).mtimeMs;

    // A fresh agent (its own peak), allowed the directory; the first one stops so the job goes here.
    if (agent) await stopProc(agent.proc);
    const listAgent = await stack.startAgent('syncbench-list', {}, ['--allow-roots', root]);
    const nfs = (name) => stack.api.data('POST', '/connections', {
      name, type: 'nfs', host: '127.0.0.1', path: '/', options: { mount_path: root }, credentials: { uid: 0, gid: 0 },
    });
    const [a, b] = [await nfs(`syncbench list src ${randomBytes(3).toString('hex')}`), await nfs(`syncbench list dst ${randomBytes(3).toString('hex')}`)];
    const watch = rssWatch(listAgent.proc.child.pid);
    const listed = await xferSync(stack.api, { name: 'sync bench listing', sourceConnectionId: a.id, sourcePath: '/tree', destinationConnectionId: b.id, destinationPath: '/tree' });
    const listRss = watch();
    if (listed.job.files_transferred !== 0 || (listed.job.files_deleted ?? 0) !== 0) throw new Error(`the equal trees' sync wrote: ${JSON.stringify(listed.job)}`);
    if (statSync(join(root, 'tree', 'd0', 'f0.bin')).mtimeMs !== mtimeBefore) throw new Error('the equal trees\' sync rewrote a file');
    results.list = { files: LIST_FILES, created, seconds: listed.seconds, rss: listRss, skipped: listed.job.files_skipped };
  }
} finally {
  await stack.stop();
  for (const root of tmpRoots) rmSync(root, { recursive: true, force: true });
  await bench.close();
}

const s = results.sync;
const ratio = s ? s.rclone / s.xfer : NaN;
if (s) {
console.log(`\nxfer sync vs rclone ${bench.rcloneVersion()}, sftp → s3 (OpenSSH sshd, versitygw) on loopback, concurrency ${CONCURRENCY}, load ${load()}`);
console.log(`rclone command: ${s.command}`);
console.log(`${FILES} files of ${FILE_BYTES} B; then ${s.changed} changed and ${s.changed} deleted`);
console.log('run                     | xfer s  | rclone s | rclone/xfer');
console.log(`first full sync         | ${s.xferFirst.toFixed(2).padStart(7)} | ${s.rcloneFirst.toFixed(2).padStart(8)} | ${(s.rcloneFirst / s.xferFirst).toFixed(2)}×`);
console.log(`measured sync (1%/1%)   | ${s.xfer.toFixed(2).padStart(7)} | ${s.rclone.toFixed(2).padStart(8)} | ${ratio.toFixed(2)}×`);
console.log(`unchanged, empty index  | ${s.xferCold.toFixed(2).padStart(7)} | ${s.rcloneCold.toFixed(2).padStart(8)} | ${(s.rcloneCold / s.xferCold).toFixed(2)}×  (xfer HEADs every object, as rclone)`);
console.log(`target xfer ≥ ${TARGETS.ratio}× rclone: ${ratio.toFixed(2)}× ${verdict(ratio >= TARGETS.ratio)}`);
console.log(`target agent peak RSS ≤ ${TARGETS.syncRssMiB} MiB during the measured sync (a fresh agent): ${s.rss.toFixed(0)} MiB ${verdict(s.rss <= TARGETS.syncRssMiB)}`);
console.log(`agent peak RSS over the first full sync: ${s.firstRss.toFixed(0)} MiB`);
console.log(`CPU seconds during xfer's measured run: ${s.cpu.map(([name, sec]) => `${name} ${sec.toFixed(1)}`).join(', ')}`);
}
if (results.list) {
  const l = results.list;
  console.log(`\n${l.files} entries compared (nfs mounted mode, destination already equal): ${l.seconds.toFixed(1)} s (files created in ${l.created.toFixed(1)} s), ${l.skipped} skipped`);
  console.log(`target agent peak RSS ≤ ${TARGETS.listRssMiB} MiB: ${l.rss.toFixed(0)} MiB ${verdict(l.rss <= TARGETS.listRssMiB)}`);
}

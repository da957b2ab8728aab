#!/usr/bin/env node
// Relay benchmark: the same sftp → s3 copy run directly on one agent and relayed between two
// (source agent → control plane → destination agent), on the same real servers in one run.
//
//   npm run build && node bench/relay-vs-direct.mjs [--small-files 2000] [--small-kib 16] [--big-mib 1024] [--concurrency 16] [--rounds 1]
//     [--warmup 1] [--only small|big] [--mode direct|relay] [--cpu-prof DIR] [--cpu-all]
//
// Two agents (A and B) of one account. The direct run's connections name neither agent, so the
// scheduler runs it on one of them; the relayed run's sftp connection is pinned to A and its s3
// connection to B, so no agent serves both ends and the job is relayed (its `mode` is checked).
// Each case runs direct then relayed (`--warmup` unmeasured rounds, then `--rounds` times,
// alternating which goes first). Prints seconds, files/s and MB/s of both, relay/direct
// throughput per round and over all rounds of a case (target ≥ 0.7×), and the peak RSS (VmHWM) of
// the control plane and both agents. Figures, not asserts.
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startStack } from '../e2e/dist/stack.js';
import { cpuBetween, cpuSeconds, cpuSnapshot, load, log, peakRssMiB, sftpToS3, writeBigFile, writeSmallFiles } from './support/sftp-s3.mjs';

const { values: args } = parseArgs({
  options: {
    'small-files': { type: 'string', default: '2000' },
    'small-kib': { type: 'string', default: '16' },
    'big-mib': { type: 'string', default: '1024' },
    concurrency: { type: 'string', default: '16' },
    rounds: { type: 'string', default: '1' },
    // Unmeasured rounds first (both modes, the case's files): the agents' and servers' first
    // copies run cold (JIT, the sshd's and the store's caches), and whichever mode went first paid for it.
    warmup: { type: 'string', default: '1' },
    // One case only, one mode only (to profile one of them; no ratio then).
    only: { type: 'string' },
    mode: { type: 'string' },
    // A directory: the control plane and both agents write V8 CPU profiles there (bench/cpu-prof.cjs).
    'cpu-prof': { type: 'string' },
    // Also print the CPU every process of the machine used during each copy (sshd, versitygw, …).
    'cpu-all': { type: 'boolean', default: false },
  },
});
const SMALL_FILES = Number(args['small-files']);
const SMALL_BYTES = Number(args['small-kib']) * 1024;
const BIG_BYTES = Number(args['big-mib']) * 1024 * 1024;
const CONCURRENCY = Number(args.concurrency);
const ROUNDS = Number(args.rounds);
const WARMUP = Number(args.warmup);
const TARGET = 0.7;

const bench = await sftpToS3('relay');
const { env: e, srcRoot } = bench;
log(`load ${load()}; writing ${SMALL_FILES} × ${SMALL_BYTES} B and one ${BIG_BYTES} B file under ${srcRoot}`);
if (args.only !== 'big') writeSmallFiles(join(srcRoot, 'small'), SMALL_FILES, SMALL_BYTES, Math.ceil(SMALL_FILES / 20));
if (args.only !== 'small') await writeBigFile(join(srcRoot, 'big', 'big.bin'), BIG_BYTES);

const stack = await startStack({ env: {
  ...e,
  ...(args['cpu-prof'] ? { NODE_OPTIONS: `--require ${new URL('./cpu-prof.cjs', import.meta.url).pathname}`, XFER_BENCH_CPU_PROF_DIR: args['cpu-prof'] } : {}),
} });
const runs = [];
try {
  const a = await stack.startAgent('relay-a');
  const b = await stack.startAgent('relay-b');
  const api = stack.api;
  const direct = await bench.connections(api, {}, { suffix: 'direct' });
  const relayed = await bench.connections(api, {}, { suffix: 'relayed', sftp: { agent_id: a.id }, s3: { agent_id: b.id } });
  const pids = { 'control plane': stack.server.child.pid, 'agent A': a.proc.child.pid, 'agent B': b.proc.child.pid };

  let n = 0;
  /** One copy through the API (create + blocking execute); checks the mode and what arrived. */
  const copy = async (mode, conns, dir, files, bytes) => {
    const prefix = `${mode}-${dir}-${++n}`;
    const job = await api.data('POST', '/transfers', {
      name: `relay bench ${prefix}`, sourceConnectionId: conns.sftp, sourcePath: `/${dir}`,
      destinationConnectionId: conns.s3, destinationPath: `/${prefix}`, options: { concurrency: CONCURRENCY, overwrite: 'always' },
    });
    const cpu0 = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid)]));
    const all0 = args['cpu-all'] ? cpuSnapshot() : null;
    const t0 = process.hrtime.bigint();
    const done = await api.call('POST', `/transfers/${job.id}/execute`);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid) - cpu0[k]]));
    if (all0) {
      const names = { ...Object.fromEntries(Object.entries(pids).map(([k, pid]) => [pid, k])), [process.pid]: 'bench' };
      const used = cpuBetween(all0, cpuSnapshot(), names).filter(([, s]) => s >= 0.05);
      log(`${dir} ${mode}: machine CPU ${used.reduce((a, [, s]) => a + s, 0).toFixed(1)} s of ${(2 * seconds).toFixed(1)} s on 2 cores: ${used.map(([k, s]) => `${k} ${s.toFixed(2)}`).join(', ')}`);
    }
    if (done.status !== 200 || !done.body.success) throw new Error(`${mode} ${dir} failed: ${JSON.stringify(done.body)}`);
    const ran = await api.data('GET', `/transfers/${job.id}`);
    if (ran.mode !== mode) throw new Error(`${mode} ${dir}: the transfer ran ${ran.mode}`);
    const copied = await bench.countObjects(`${prefix}/`);
    if (copied.files !== files || copied.bytes !== bytes) throw new Error(`${mode} ${dir}: copied ${copied.files} files / ${copied.bytes} B, expected ${files} / ${bytes}`);
    log(`${dir} ${mode}: ${seconds.toFixed(2)} s; CPU ${Object.entries(cpu).map(([k, s]) => `${k} ${s.toFixed(1)} s`).join(', ')}`);
    return { seconds, cpu };
  };

  for (const [label, dir, files, bytes] of [
    ['(a) small files', 'small', SMALL_FILES, SMALL_FILES * SMALL_BYTES],
    ['(b) one big file', 'big', 1, BIG_BYTES],
  ]) {
    if (args.only && args.only !== dir) continue;
    for (let round = -WARMUP; round < ROUNDS; round++) {
      const order = (round % 2 === 0 ? ['direct', 'relay'] : ['relay', 'direct']).filter((m) => !args.mode || m === args.mode);
      const got = {};
      if (round < 0) log(`${dir}: warm-up round, not counted`);
      for (const mode of order) got[mode] = await copy(mode, mode === 'relay' ? relayed : direct, dir, files, bytes);
      if (round >= 0 && got.direct && got.relay) runs.push({ label, files, bytes, direct: got.direct, relay: got.relay });
    }
  }

  const peaks = Object.entries(pids).map(([k, pid]) => `${k} ${peakRssMiB(pid).toFixed(0)} MiB`).join(', ');
  const mb = (b, s) => (b / 1e6 / s).toFixed(1);
  const fps = (f, s) => (f / s).toFixed(0);
  console.log(`\nrelay vs direct, sftp → s3 (OpenSSH sshd, versitygw) on loopback, concurrency ${CONCURRENCY}; load ${load()}`);
  console.log('case               | direct s | relay s | direct files/s | relay files/s | direct MB/s | relay MB/s | relay/direct | target');
  // Each round, then each case over all its rounds (total bytes over total seconds of each mode).
  const totals = [...new Set(runs.map((r) => r.label))].map((label) => {
    const of = runs.filter((r) => r.label === label);
    const sum = (mode) => ({ seconds: of.reduce((a, r) => a + r[mode].seconds, 0) });
    return { label: `${label.slice(0, 3)} all ${of.length}`, files: of[0].files * of.length, bytes: of[0].bytes * of.length, direct: sum('direct'), relay: sum('relay') };
  });
  for (const r of [...runs, ...(ROUNDS > 1 ? totals : [])]) {
    const ratio = r.direct.seconds / r.relay.seconds;
    console.log(
      `${r.label.padEnd(18)} | ${r.direct.seconds.toFixed(2).padStart(8)} | ${r.relay.seconds.toFixed(2).padStart(7)} | ` +
      `${fps(r.files, r.direct.seconds).padStart(14)} | ${fps(r.files, r.relay.seconds).padStart(13)} | ` +
      `${mb(r.bytes, r.direct.seconds).padStart(11)} | ${mb(r.bytes, r.relay.seconds).padStart(10)} | ${ratio.toFixed(2).padStart(11)}× | ≥ ${TARGET}× ${ratio >= TARGET ? 'met' : 'NOT met'}`,
    );
  }
  console.log(`peak RSS (VmHWM): ${peaks}`);
} finally {
  await stack.stop();
  await bench.close();
}

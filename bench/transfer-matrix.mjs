#!/usr/bin/env node
// Transfer matrix: xfer against rclone and against the pair's solo ceiling, for every pair of
// endpoints the agents serve, in one run, on loopback and (--wan) through a 50 ms round-trip proxy.
//
//   npx tsc -b && node bench/transfer-matrix.mjs [--pairs sftp-s3,s3-sftp,smb-s3,nfs-s3,s3-s3,sftp-sftp]
//     [--cases small,large] [--small-files 2000] [--small-kib 16] [--large-mib 1024] [--with-5g] [--huge-mib 5120]
//     [--concurrency 16] [--warmup 1] [--wan] [--wan-pairs sftp-s3] [--wan-latency-ms 25] [--wan-rate-kbps 0]
//
// For each pair and case: xfer (control plane + agent binaries, a transfer created and executed
// through the API), rclone (`rclone copy`, same servers, fresh destination prefix) and the solo
// ceiling: the source read to nowhere and the destination written from generated data, each
// with the agent's own connector (its library and default settings, `concurrency` files at a
// time) and, for one big file, a reference client (OpenSSH sftp, smbclient, rclone cat/rcat). An
// end's speed is the faster of its clients; the slower end is the ceiling. Prints the ratios
// xfer/rclone and xfer/ceiling, the agent's peak RSS per case (VmHWM, reset before each copy),
// the CPU seconds the agent and the control plane used over each copy, and a markdown table with
// the targets of issue 26 marked met/MISSED. Figures, not asserts.
// README.md "Benchmarks" says what each figure means.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { startStack } from '../e2e/dist/stack.js';
import { ensureServices, releaseServices } from '../e2e/dist/services/index.js';
import { ensureRclone } from '../e2e/dist/tools/rclone.js';
import { defaultCacheDir } from '@xfer/control-plane';
import { agentConnector, apiBody, endpoint, generated, LOOPBACK, manifest, pool, prefixed, SERVICES, timed } from './support/endpoints.mjs';
import { busyPercent, cpuBetween, cpuSeconds, cpuSnapshot, load, log, machineCpu, peakRssMiB, resetPeakRss } from './support/proc.mjs';
import { startWan } from './support/toxiproxy.mjs';

const ALL_PAIRS = {
  'sftp-s3': ['sftp', 's3'],
  's3-sftp': ['s3src', 'sftp'],
  'smb-s3': ['smb', 's3'],
  'nfs-s3': ['nfs', 's3'],
  // Same store, two buckets.
  's3-s3': ['s3src', 's3'],
  'sftp-sftp': ['sftp', 'sftp'],
};
const TYPE = { sftp: 'sftp', s3: 's3', s3src: 's3', smb: 'smb', nfs: 'nfs' };

const { values: args } = parseArgs({
  options: {
    pairs: { type: 'string', default: Object.keys(ALL_PAIRS).join(',') },
    cases: { type: 'string', default: 'small,large' },
    'small-files': { type: 'string', default: '2000' },
    'small-kib': { type: 'string', default: '16' },
    'large-mib': { type: 'string', default: '1024' },
    // One 5 GiB file, sftp → s3 only (--huge-mib: its size, for a smoke run of that case).
    'with-5g': { type: 'boolean', default: false },
    'huge-mib': { type: 'string', default: '5120' },
    concurrency: { type: 'string', default: '16' },
    // Unmeasured xfer copies of the first pair's first case before the measured ones.
    warmup: { type: 'string', default: '1' },
    wan: { type: 'boolean', default: false },
    'wan-pairs': { type: 'string', default: 'sftp-s3' },
    'wan-latency-ms': { type: 'string', default: '25' },
    'wan-rate-kbps': { type: 'string', default: '0' },
  },
});
const pairs = args.pairs.split(',').map((p) => p.trim()).filter(Boolean);
for (const p of pairs) if (!ALL_PAIRS[p]) throw new Error(`--pairs: unknown pair ${p} (known: ${Object.keys(ALL_PAIRS).join(', ')})`);
const SMALL_FILES = Number(args['small-files']);
const CASES = {
  small: { count: SMALL_FILES, bytes: Number(args['small-kib']) * 1024, perDir: Math.ceil(SMALL_FILES / 20) },
  large: { count: 1, bytes: Number(args['large-mib']) * 1024 * 1024 },
  huge: { count: 1, bytes: Number(args['huge-mib']) * 1024 * 1024 },
};
const cases = args.cases.split(',').map((c) => c.trim()).filter(Boolean);
for (const c of cases) if (c !== 'small' && c !== 'large') throw new Error(`--cases: unknown case ${c} (small, large; the 5 GiB one is --with-5g)`);
// The 5 GiB file on loopback only (no target over the WAN; it would add half an hour).
const casesOf = (pair, net = LOOPBACK) => [...cases, ...(args['with-5g'] && pair === 'sftp-s3' && net === LOOPBACK ? ['huge'] : [])];
const CONCURRENCY = Number(args.concurrency);
const wanPairs = args.wan ? args['wan-pairs'].split(',').filter((p) => pairs.includes(p)) : [];

const keys = [...new Set(pairs.flatMap((p) => ALL_PAIRS[p]))];
const services = ['mongodb', ...new Set(keys.flatMap((k) => SERVICES[TYPE[k]]))];
const run = randomBytes(3).toString('hex');
const cleanups = [];
let cleaning;
/**
 * Everything this run started or wrote, last first; once, on success, failure or Ctrl-C (the
 * main flow, failing as the signal's cleanup stops the stack, waits for the same cleanup).
 */
function cleanup() {
  cleaning ??= (async () => {
    for (const fn of cleanups.reverse()) {
      try {
        await fn();
      } catch (err) {
        log(`cleanup: ${err.message}`);
      }
    }
  })();
  return cleaning;
}
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => void cleanup().finally(() => process.exit(130)));

const rows = [];
try {
  const { env } = await ensureServices(services, { env: process.env, log });
  cleanups.push(() => releaseServices(services, { env: process.env, log }));
  const e = { ...process.env, ...env };
  const rclone = await ensureRclone({ cacheDir: defaultCacheDir(process.env), env: process.env, log });
  const rcloneVersion = spawnSync(rclone, ['version'], { encoding: 'utf8' }).stdout.split('\n')[0];

  const eps = {};
  for (const k of keys) {
    eps[k] = await endpoint(TYPE[k], e, k === 's3src' ? `matrix-src-${run}` : `matrix-${run}`, rclone);
    cleanups.push(() => eps[k].close());
  }
  const nets = [LOOPBACK];
  if (wanPairs.length) {
    const wan = await startWan({ latencyMs: Number(args['wan-latency-ms']), rateKBps: Number(args['wan-rate-kbps']), env: process.env, log });
    cleanups.push(() => wan.stop());
    nets.push({ ...wan, name: 'wan' });
  }

  // The sources, each case written once.
  const seeded = new Set();
  for (const pair of pairs) {
    const src = ALL_PAIRS[pair][0];
    for (const c of casesOf(pair)) {
      if (seeded.has(`${src}/${c}`)) continue;
      seeded.add(`${src}/${c}`);
      log(`${src}: writing ${c} (${CASES[c].count} × ${CASES[c].bytes} B); load ${load()}`);
      await eps[src].seed(c, CASES[c]);
    }
  }

  const stack = await startStack({ env: e });
  cleanups.push(() => stack.stop());
  const agent = await stack.startAgent('matrix');
  const agentPid = agent.proc.child.pid;
  const serverPid = stack.server.child.pid;
  const api = stack.api;
  const conns = new Map();
  const connection = async (k, net) => {
    const key = `${k}/${net.name}`;
    if (!conns.has(key)) conns.set(key, (await api.data('POST', '/connections', { ...apiBody(await eps[k].settings(net)), name: `matrix-${k}-${net.name}-${run}` })).id);
    return conns.get(key);
  };
  let n = 0;
  const check = async (what, ep, dir, spec) => {
    const got = await ep.count(dir);
    if (got.files !== spec.count || got.bytes !== spec.count * spec.bytes) throw new Error(`${what}: copied ${got.files} files / ${got.bytes} B, expected ${spec.count} / ${spec.count * spec.bytes}`);
  };

  // An end's solo speed, once per endpoint, case and network in the run (both pairs of an end share it).
  const solos = new Map();
  const solo = async (k, role, c, net) => {
    const key = `${k}/${role}/${c}/${net.name}`;
    if (solos.has(key)) return solos.get(key);
    const ep = eps[k];
    const spec = CASES[c];
    const files = manifest(c, spec);
    const clients = [];
    const connector = await agentConnector(ep, net);
    try {
      const t0 = process.hrtime.bigint();
      if (role === 'read') {
        let bytes = 0;
        await pool(files, CONCURRENCY, async (f) => {
          for await (const chunk of await connector.read(f.path)) bytes += chunk.length;
        });
        if (bytes !== spec.count * spec.bytes) throw new Error(`${k} connector read ${bytes} B of ${spec.count * spec.bytes}`);
      } else {
        const dir = `ceiling-${c}-${++n}`;
        await pool(files, CONCURRENCY, (f) => connector.write(`${dir}/${f.path}`, generated(f.size), { size: f.size }));
        clients.push({ client: 'connector', seconds: Number(process.hrtime.bigint() - t0) / 1e9 });
        await check(`${k} connector write`, ep, dir, spec);
        await ep.remove(dir);
      }
      if (role === 'read') clients.push({ client: 'connector', seconds: Number(process.hrtime.bigint() - t0) / 1e9 });
    } finally {
      await connector.close();
    }
    if (spec.count === 1) {
      if (role === 'read' && ep.referenceRead) clients.push(await ep.referenceRead(net, files[0].path));
      if (role === 'write') {
        const dir = `ceiling-rcat-${++n}`;
        const { config, path } = await ep.rclone(net, dir);
        if (config.TYPE !== 'local') {
          const seconds = await timed(rclone, ['rcat', `D:${path}/${files[0].path}`, '--s3-upload-concurrency', '4'], { env: { ...process.env, ...prefixed('D', config) }, input: generated(spec.bytes) });
          clients.push({ client: 'rclone rcat', seconds });
          await check(`${k} rclone rcat`, ep, dir, spec);
          await ep.remove(dir);
        }
      }
    }
    const best = clients.reduce((a, b) => (b.seconds < a.seconds ? b : a));
    const result = { clients, best };
    log(`${k} ${role} ${c} ${net.name}: ${clients.map((x) => `${x.client} ${x.seconds.toFixed(2)} s`).join(', ')}`);
    solos.set(key, result);
    return result;
  };

  /** Destinations without a store checksum, where verify=checksum reads the written file back (docs/agent.md). */
  const NO_STORE_CHECKSUM = new Set(['sftp', 'smb', 'nfs']);
  /** One xfer copy through the API (create + blocking execute), checked and removed; the agent's peak RSS over it. */
  const xferCopy = async (s, d, c, net, label, verify = 'checksum') => {
    const spec = CASES[c];
    const prefix = `xfer-${c}-${net.name}-${++n}`;
    const job = await api.data('POST', '/transfers', {
      name: `matrix ${label} ${n}`, sourceConnectionId: await connection(s, net), sourcePath: `/${c}`,
      destinationConnectionId: await connection(d, net), destinationPath: `/${prefix}`, options: { concurrency: CONCURRENCY, overwrite: 'always', verify },
    });
    resetPeakRss(agentPid);
    const cpu0 = [cpuSeconds(agentPid), cpuSeconds(serverPid)];
    const [machine0, procs0] = [machineCpu(), cpuSnapshot()];
    const t0 = process.hrtime.bigint();
    const done = await api.call('POST', `/transfers/${job.id}/execute`);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const [machine1, procs1] = [machineCpu(), cpuSnapshot()];
    const rss = peakRssMiB(agentPid);
    const cpu = {
      agent: cpuSeconds(agentPid) - cpu0[0], server: cpuSeconds(serverPid) - cpu0[1],
      // How busy the whole machine was, and who used it: the servers of both ends, the agent and
      // the proxy share its cores, where each end alone had them all (the ceiling's measure).
      machine: busyPercent(machine0, machine1),
      top: cpuBetween(procs0, procs1, { [agentPid]: 'xfer-agent', [serverPid]: 'xfer-server' }).slice(0, 4),
    };
    if (done.status !== 200 || !done.body.success) throw new Error(`xfer ${label} failed: ${JSON.stringify(done.body)}`);
    await check(`xfer ${label}`, eps[d], prefix, spec);
    await eps[d].remove(prefix);
    return { seconds, rss, cpu };
  };

  // Unmeasured: the agent's and the servers' first copy runs cold (JIT, sessions, caches), and
  // whichever case came first paid for it.
  for (let i = 0; i < Number(args.warmup); i++) {
    const [s, d] = ALL_PAIRS[pairs[0]];
    const { seconds } = await xferCopy(s, d, cases[0], LOOPBACK, `warm-up ${pairs[0]} ${cases[0]}`);
    log(`warm-up ${pairs[0]} ${cases[0]}: xfer ${seconds.toFixed(2)} s, not counted`);
  }

  for (const net of nets) {
    for (const pair of pairs) {
      if (net !== LOOPBACK && !wanPairs.includes(pair)) continue;
      const [s, d] = ALL_PAIRS[pair];
      for (const c of casesOf(pair, net)) {
        const spec = CASES[c];
        const label = `${pair} ${c} ${net.name}`;
        const { seconds: xfer, rss, cpu } = await xferCopy(s, d, c, net, label);
        log(`${label}: xfer ${xfer.toFixed(2)} s, agent peak RSS ${rss.toFixed(0)} MiB, CPU agent ${cpu.agent.toFixed(1)} s, control plane ${cpu.server.toFixed(1)} s; machine ${cpu.machine.toFixed(0)}% busy (${cpu.top.map(([name, sec]) => `${name} ${sec.toFixed(1)} s`).join(', ')})`);
        // A file store keeps no checksum to compare: xfer's default (verify=checksum) reads every
        // written file back, where rclone checks the size (the test sshd runs no shell for its
        // md5sum). Like for like: xfer once more with verify=size.
        let sizeOnly = null;
        if (NO_STORE_CHECKSUM.has(d)) {
          sizeOnly = (await xferCopy(s, d, c, net, `${label} verify=size`, 'size')).seconds;
          log(`${label}: xfer verify=size ${sizeOnly.toFixed(2)} s`);
        }

        // rclone
        const rprefix = `rclone-${c}-${net.name}-${++n}`;
        const from = await eps[s].rclone(net, c);
        const to = await eps[d].rclone(net, rprefix);
        const rcl = await timed(rclone, ['copy', `S:${from.path}`, `D:${to.path}`, '--transfers', String(CONCURRENCY), '--checkers', String(CONCURRENCY * 2), '--s3-upload-concurrency', '4'],
          { env: { ...process.env, ...prefixed('S', from.config), ...prefixed('D', to.config) } });
        await check(`rclone ${label}`, eps[d], rprefix, spec);
        await eps[d].remove(rprefix);
        log(`${label}: rclone ${rcl.toFixed(2)} s${from.note ? ` (source: ${from.note})` : ''}`);

        const read = await solo(s, 'read', c, net);
        const write = await solo(d, 'write', c, net);
        rows.push({ pair, c, net: net.name, spec, xfer, sizeOnly, rclone: rcl, rcloneNote: from.note, read, write, ceiling: Math.max(read.best.seconds, write.best.seconds), rss, cpu });
      }
    }
  }

  report(rcloneVersion);
} finally {
  await cleanup();
}

function report(rcloneVersion) {
  const mbs = (r, seconds) => (r.spec.count * r.spec.bytes) / 1e6 / seconds;
  const speed = (r, seconds) => (r.spec.count > 1 ? `${(r.spec.count / seconds).toFixed(0)} files/s` : `${mbs(r, seconds).toFixed(0)} MB/s`);
  const clients = (solo, r) => solo.clients.map((x) => `${x.client} ${speed(r, x.seconds)}`).join(', ');
  const mark = (ok) => (ok ? 'met' : '**MISSED**');
  const lines = [];
  for (const r of rows) {
    const vsRclone = r.rclone / r.xfer;
    const vsCeiling = r.ceiling / r.xfer;
    const targets = [];
    if (r.c === 'small') targets.push(`≥ 2.5× rclone ${mark(vsRclone >= 2.5)}`);
    else {
      if (r.pair === 's3-s3') targets.push(`≥ 10× byte-moving ceiling ${mark(vsCeiling >= 10)}`);
      else if (r.net === 'loopback') targets.push(`≥ 0.9× ceiling ${mark(vsCeiling >= 0.9)}`);
      if (r.net === 'loopback') targets.push(`≥ 1.5× rclone ${mark(vsRclone >= 1.5)}`);
    }
    if (r.net === 'wan' && r.pair === 'sftp-s3' && r.c !== 'small') {
      const lo = rows.find((x) => x.pair === r.pair && x.c === r.c && x.net === 'loopback');
      if (lo) targets.push(`≥ 0.7× loopback (${(lo.xfer / r.xfer).toFixed(2)}×) ${mark(lo.xfer / r.xfer >= 0.7)}`);
      targets.push(`≥ 3× rclone ${mark(vsRclone >= 3)}`);
    }
    targets.push(`RSS ≤ 200 MiB ${mark(r.rss <= 200)}`);
    const size = r.spec.count > 1 ? `${r.spec.count} × ${r.spec.bytes / 1024} KiB` : `1 × ${r.spec.bytes / 1048576} MiB`;
    const sizeOnly = r.sizeOnly === null ? '—' : `${r.sizeOnly.toFixed(2)} s (${(r.rclone / r.sizeOnly).toFixed(2)}× rclone)`;
    lines.push(`| ${r.net} | ${r.pair} | ${size} | ${r.xfer.toFixed(2)} s (${speed(r, r.xfer)}) | ${sizeOnly} | ${r.rclone.toFixed(2)} s (${speed(r, r.rclone)})${r.rcloneNote ? ` ¹` : ''} | ` +
      `${clients(r.read, r)} | ${clients(r.write, r)} | ${r.ceiling.toFixed(2)} s (${speed(r, r.ceiling)}) | ${vsRclone.toFixed(2)}× | ${vsCeiling.toFixed(2)}× | ${r.rss.toFixed(0)} MiB | ${r.cpu.agent.toFixed(1)} / ${r.cpu.server.toFixed(1)} s | ${r.cpu.machine.toFixed(0)}% | ${targets.join('; ')} |`);
  }
  console.log(`\n### Transfer matrix, ${new Date().toISOString().slice(0, 10)}: xfer vs ${rcloneVersion} vs the solo ceiling, concurrency ${CONCURRENCY}; load ${load()}`);
  if (wanPairs.length) console.log(`wan: through Toxiproxy, ${args['wan-latency-ms']} ms each way${Number(args['wan-rate-kbps']) ? `, ${args['wan-rate-kbps']} KB/s each direction` : ''} (sftp, s3, smb; nfs direct)`);
  console.log('\n| net | pair | case | xfer | xfer verify=size | rclone | source read alone | destination write alone | ceiling | xfer/rclone | xfer/ceiling | agent peak RSS | CPU agent / control plane | machine busy | targets |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const l of lines) console.log(l);
  if (rows.some((r) => r.rcloneNote)) console.log('\n¹ rclone has no NFS client: it read the exported directory on this machine.');
}

#!/usr/bin/env node
// Bandwidth limit (issue 25): does `options.bandwidth_limit` hold, and what does the limiter cost when unset?
//
//   npm run build && node bench/bandwidth-limit.mjs [--mib 200] [--rate 20000000] [--runs 3] [--cost-runs 7]
//
// The agent's copy engine and connectors (agent/dist) copy from the test sshd (sftp) to a local
// directory, as a job does, with the job runner's RunLimits (copy/bandwidth.ts runPacer):
// (a) one --mib MiB file at --rate bytes/s; (b) the same bytes as 8 files, 4 at a time, sharing
// the rate; then the cost when unset: the same file with no limit (what every job without one
// runs: `pace` hands back the body itself) against the engine with no RunLimits at all (the engine
// before) and against a limit far above the link (the pacer in the pipeline, never waiting).
// Prints the measured times, the error against bytes/rate (median of --runs), and the ratios
// (median of --cost-runs: unlimited runs on a shared machine vary more).
// Figures, not asserts.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { ensureServices, releaseServices } from '../e2e/dist/services/index.js';
import { copyTree } from '../agent/dist/copy/copy-engine.js';
import { runPacer } from '../agent/dist/copy/bandwidth.js';
import { AgentAccess } from '../agent/dist/connectors/access.js';
import { FsConnector } from '../agent/dist/connectors/fs/fs.connector.js';
import { SftpConnector } from '../agent/dist/connectors/sftp/sftp.connector.js';
import { writeBigFile } from './support/sftp-s3.mjs';

const { values: args } = parseArgs({ options: { mib: { type: 'string', default: '200' }, rate: { type: 'string', default: '20000000' }, runs: { type: 'string', default: '3' }, 'cost-runs': { type: 'string', default: '7' } } });
const BYTES = Number(args.mib) * 1024 * 1024;
const RATE = Number(args.rate);
const RUNS = Number(args.runs);
const COST_RUNS = Number(args['cost-runs']);
const log = (msg) => process.stderr.write(`bench: ${msg}\n`);

const { env } = await ensureServices(['sftp'], { env: process.env, log });
const base = join(env.XFER_TEST_SFTP_ROOT, `bench-bw-${randomBytes(4).toString('hex')}`);
const work = mkdtempSync(join(tmpdir(), 'xfer-bench-bw-'));
const open = new AgentAccess({ allowRoots: [work], allowHosts: [], denyHosts: [] });
let source;
try {
  log(`writing one ${BYTES} B file and 8 × ${BYTES / 8} B under ${base}`);
  await writeBigFile(join(base, 'one', 'big.bin'), BYTES);
  for (let i = 0; i < 8; i++) await writeBigFile(join(base, 'eight', `part-${i}.bin`), BYTES / 8);
  source = new SftpConnector({
    id: '000000000000000000000001', name: 'bench sftp', type: 'sftp', host: env.XFER_TEST_SFTP_HOST, port: Number(env.XFER_TEST_SFTP_PORT),
    path: base, options: {}, agent_id: null, credentials: { username: env.XFER_TEST_SFTP_USER, password: env.XFER_TEST_SFTP_PASSWORD },
  }, {}, open);
  const destination = new FsConnector({ root: work, fsync: false, access: open });

  let n = 0;
  /** One run as the job runner starts it; resolves with its seconds. */
  const copy = async (dir, concurrency, limits) => {
    const target = `/run-${++n}`;
    const t0 = performance.now();
    const outcome = await copyTree({
      source, sourcePath: `/${dir}`, destination, destinationPath: target, resume: false, signal: new AbortController().signal,
      options: { overwrite: 'always', verify: 'size', concurrency }, limits,
    });
    const seconds = (performance.now() - t0) / 1000;
    if (outcome.status !== 'completed' || outcome.counters.bytes_transferred !== BYTES) throw new Error(`run ${dir} ended ${outcome.status}: ${outcome.error ?? JSON.stringify(outcome.counters)}`);
    rmSync(join(work, target), { recursive: true, force: true });
    return seconds;
  };
  const limits = (rate) => ({ pace: runPacer(rate, null), mayStart: () => true });
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

  log('warm-up run (connects, fills the page cache)');
  await copy('one', 4, undefined);

  const expected = BYTES / RATE;
  const limited = { one: [], eight: [] };
  const unset = { before: [], unset: [], far: [] };
  for (let run = 1; run <= RUNS; run++) {
    limited.one.push(await copy('one', 4, limits(RATE)));
    limited.eight.push(await copy('eight', 4, limits(RATE)));
    log(`run ${run}: limited ${limited.one.at(-1).toFixed(2)} s (one file), ${limited.eight.at(-1).toFixed(2)} s (8 files)`);
  }
  for (let run = 1; run <= COST_RUNS; run++) {
    // Alternated so that the machine's drift hits each alike.
    unset.before.push(await copy('one', 4, undefined));
    unset.unset.push(await copy('one', 4, limits(undefined)));
    unset.far.push(await copy('one', 4, limits(100_000_000_000)));
    log(`cost run ${run}: before ${unset.before.at(-1).toFixed(2)} s, unset ${unset.unset.at(-1).toFixed(2)} s, far ${unset.far.at(-1).toFixed(2)} s`);
  }

  console.log(`bandwidth_limit ${RATE} B/s, ${BYTES} B (${args.mib} MiB): expected ${expected.toFixed(3)} s (bytes / rate)`);
  for (const [label, times] of [['(a) one file', limited.one], ['(b) 8 files, 4 at a time', limited.eight]]) {
    const m = median(times);
    console.log(`${label.padEnd(26)} ${m.toFixed(3)} s  error ${(((m - expected) / expected) * 100).toFixed(2)}% against bytes/rate, ${(((m - 10) / 10) * 100).toFixed(2)}% against 10 s  (runs: ${times.map((t) => t.toFixed(2)).join(', ')})`);
  }
  const before = median(unset.before);
  console.log(`cost when unset (${args.mib} MiB, no limit; median of ${COST_RUNS}):`);
  console.log(`  engine without RunLimits (before)   ${before.toFixed(3)} s  ${(BYTES / 1048576 / before).toFixed(0)} MiB/s`);
  for (const [label, times] of [['RunLimits, no limit (pace = body)', unset.unset], ['limit far above the link (paced)', unset.far]]) {
    const m = median(times);
    console.log(`  ${label.padEnd(36)}${m.toFixed(3)} s  ${(BYTES / 1048576 / m).toFixed(0)} MiB/s  ratio to before ${(m / before).toFixed(3)}`);
  }
} finally {
  await source?.close();
  rmSync(work, { recursive: true, force: true });
  rmSync(base, { recursive: true, force: true });
  await releaseServices(['sftp'], { env: process.env, log });
}

#!/usr/bin/env node
// A watcher over a 100,000-file folder: how long each poll takes and what the agent's memory does
// over ten polls, against one `rclone lsf` of the same folder on the same sftp server (issue 15).
//
//   npm run build && node --expose-gc bench/watcher-poll.mjs [--files 100000] [--polls 10] [--changed 100]
//
// The agent's poller (agent/dist/watch FolderWatch, the code the agent's watch runner runs) lists
// the folder through the real sftp connector in this process, ten times; between polls 5 and 6,
// --changed files are rewritten (a new size), and the poll after reports exactly those. Prints
// each poll's seconds, listed/reported counts, the watcher's state bytes and the process's RSS and
// heap after the poll; then the RSS growth from the 2nd to the last poll (target: flat), and the
// median poll time against rclone's listing (a ratio, measured in the same run).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { FolderWatch } from '../agent/dist/watch/index.js';
import { registryConnectors } from '../agent/dist/lib/connector-source.js';
import { load, log, sftpToS3, writeSmallFiles } from './support/sftp-s3.mjs';

const { values: args } = parseArgs({
  options: {
    files: { type: 'string', default: '100000' },
    polls: { type: 'string', default: '10' },
    changed: { type: 'string', default: '100' },
  },
});
const FILES = Number(args.files);
const POLLS = Number(args.polls);
const CHANGED = Number(args.changed);
const MiB = 1024 * 1024;
const gc = globalThis.gc ?? (() => log('run with --expose-gc for heap figures after a collection'));

const bench = await sftpToS3('bench-watch');
try {
  log(`writing ${FILES} files into one folder under ${bench.srcRoot} (load ${load()})`);
  // One folder of them all (perDir = FILES): the case a watched inbox is.
  writeSmallFiles(join(bench.srcRoot, 'inbox'), FILES, 64, FILES);
  const e = bench.env;
  const connector = await registryConnectors.create({
    id: '000000000000000000000001', name: 'bench watch', type: 'sftp', host: e.XFER_TEST_SFTP_HOST, port: Number(e.XFER_TEST_SFTP_PORT),
    path: bench.srcRoot, options: {}, agent_id: null, credentials: { username: e.XFER_TEST_SFTP_USER, password: e.XFER_TEST_SFTP_PASSWORD },
  });
  // The folder writeSmallFiles made: inbox/d0.
  const watch = new FolderWatch({ path: 'inbox/d0', pattern: '*', recursive: false, stable_seconds: 0, include_existing: false });
  const rows = [];
  for (let i = 1; i <= POLLS; i++) {
    if (i === 6) for (let k = 0; k < CHANGED; k++) writeFileSync(join(bench.srcRoot, 'inbox', 'd0', `f${k}.bin`), Buffer.alloc(65 + (k % 7)));
    let reported = 0;
    const t0 = process.hrtime.bigint();
    const summary = await watch.poll(connector, { report: () => { reported++; } });
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    gc();
    const mem = process.memoryUsage();
    rows.push({ poll: i, seconds, listed: summary.listed, reported, state_kib: Math.round(summary.state_bytes / 1024), rss: mem.rss / MiB, heap: mem.heapUsed / MiB });
    log(`poll ${i}: ${seconds.toFixed(2)} s, listed ${summary.listed}, reported ${reported}, state ${Math.round(summary.state_bytes / 1024)} KiB, RSS ${(mem.rss / MiB).toFixed(1)} MiB, heap ${(mem.heapUsed / MiB).toFixed(1)} MiB`);
  }
  await connector.close?.();
  const lists = [];
  for (let i = 0; i < 3; i++) lists.push(await bench.rcloneList('inbox/d0'));
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const pollMedian = median(rows.slice(1).map((r) => r.seconds));
  const rcloneMedian = median(lists.map((l) => l.seconds));
  const rssGrowth = rows[rows.length - 1].rss - rows[1].rss;
  const heapGrowth = rows[rows.length - 1].heap - rows[1].heap;
  console.log(`watcher over ${FILES} files (sftp, one folder), ${POLLS} polls; rclone ${bench.rcloneVersion()}`);
  console.log('poll  seconds  listed  reported  state KiB  RSS MiB  heap MiB');
  for (const r of rows) console.log(`${String(r.poll).padStart(4)}  ${r.seconds.toFixed(2).padStart(7)}  ${String(r.listed).padStart(6)}  ${String(r.reported).padStart(8)}  ${String(r.state_kib).padStart(9)}  ${r.rss.toFixed(1).padStart(7)}  ${r.heap.toFixed(1).padStart(8)}`);
  console.log(`reported after the baseline: poll 6 reported ${rows[5]?.reported ?? 0} of the ${CHANGED} changed files, the others 0: ${rows.filter((r, i) => i !== 5).every((r) => r.reported === 0)}`);
  console.log(`RSS from poll 2 to poll ${POLLS}: ${rssGrowth >= 0 ? '+' : ''}${rssGrowth.toFixed(1)} MiB; heap ${heapGrowth >= 0 ? '+' : ''}${heapGrowth.toFixed(1)} MiB (target: flat)`);
  console.log(`median poll ${pollMedian.toFixed(2)} s; rclone lsf of the same folder ${rcloneMedian.toFixed(2)} s (${lists[0].names} names): ratio ${(pollMedian / rcloneMedian).toFixed(2)} (poll / rclone listing)`);
} finally {
  await bench.close();
}

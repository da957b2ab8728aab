#!/usr/bin/env node
// The service's own file store: a big upload (scanned by clamd while it streams) and its download
// through the real `xfer-server` binary, against baselines measured in the same run.
//
//   npm run build && node bench/files-upload-download.mjs [--mib 2048]
//
// Baselines: the upload can go no faster than clamd scanning the same bytes sent to it directly
// (INSTREAM in the same windows as the server, no HTTP, no storage); the download no faster than reading the stored file from the
// local disk. Prints MB/s, the ratios, and the control plane's RSS before and at its peak.
// Figures, not assertions.
import { createReadStream, readdirSync, statSync } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureServices, releaseServices } from '../e2e/dist/services/index.js';
import { startStack } from '../e2e/dist/stack.js';
import { downloadHash, keystream, rssMiB, uploadFile } from '../e2e/dist/tools/file-transfer.js';
import { CLAMD_MAX_SCAN_BYTES } from '@xfer/control-plane/clamd';
import { instreamWindows } from '../control-plane/dist/lib/clamd-windows.js';
import { WINDOW_OVERLAP_BYTES } from '../control-plane/dist/plugins/app/files/scanner.js';

const { values: args } = parseArgs({ options: { mib: { type: 'string', default: '2048' } } });
const SIZE = Number(args.mib) * 1024 * 1024;
const SERVICES = ['mongodb', 'clamd'];
const log = (msg) => process.stderr.write(`bench: ${msg}\n`);
const mbps = (bytes, ms) => (bytes / 1e6 / (ms / 1000)).toFixed(0);

const { env } = await ensureServices(SERVICES, { env: process.env, log });
const e = { ...process.env, ...env };
const [host, port] = e.XFER_TEST_CLAMD.split(':');
const stack = await startStack({ env: e, serverEnv: { XFER_CLAMD: e.XFER_TEST_CLAMD } });
try {
  const pid = stack.server.child.pid;
  const seed = randomBytes(32);

  const warm = await uploadFile(stack.url, stack.api.token, { name: 'warm.bin', size: 4 << 20, content: keystream(4 << 20) });
  await downloadHash(`${stack.url}/files/${warm.body.data.id}/download`, stack.api.token);
  const before = rssMiB(pid).now;

  log(`xfer: upload of ${SIZE} B`);
  let t = performance.now();
  const up = await uploadFile(stack.url, stack.api.token, { name: 'big.bin', size: SIZE, content: keystream(SIZE, seed) });
  const upMs = performance.now() - t;
  if (up.status !== 201) throw new Error(`upload: ${up.status} ${JSON.stringify(up.body)}`);
  const afterUpload = rssMiB(pid).peak;

  // Other bytes of the same size: clamd caches the verdict of content it has scanned clean before.
  log(`baseline: ${SIZE} B straight to clamd (INSTREAM)`);
  t = performance.now();
  const verdict = await instreamWindows({ host, port: Number(port) }, keystream(SIZE, randomBytes(32)), {
    timeoutMs: 30 * 60_000, windowBytes: CLAMD_MAX_SCAN_BYTES, overlapBytes: WINDOW_OVERLAP_BYTES,
  });
  const scanMs = performance.now() - t;
  if (!verdict.clean) throw new Error(`clamd flagged the bench data: ${verdict.signature}`);


  // The stored object is the biggest file under the store's directory.
  const objects = [];
  const walk = (dir) => { for (const d of readdirSync(dir, { withFileTypes: true })) d.isDirectory() ? walk(join(dir, d.name)) : objects.push(join(dir, d.name)); };
  walk(join(stack.serverEnv.XFER_DATA_DIR, 'files'));
  const stored = objects.sort((a, b) => statSync(b).size - statSync(a).size)[0];
  log('baseline: reading the stored file from disk');
  t = performance.now();
  const disk = createHash('sha256');
  for await (const chunk of createReadStream(stored, { highWaterMark: 1 << 20 })) disk.update(chunk);
  const diskMs = performance.now() - t;

  log('xfer: download');
  t = performance.now();
  const down = await downloadHash(`${stack.url}/files/${up.body.data.id}/download`, stack.api.token);
  const downMs = performance.now() - t;
  const identical = down.sha256 === up.sha256 && disk.digest('hex') === up.sha256;
  const { peak } = rssMiB(pid);

  console.log(`file: ${SIZE} B (${(SIZE / 1024 ** 3).toFixed(2)} GiB), bytes identical after the round trip: ${identical}`);
  console.log('| step | xfer | baseline | xfer / baseline |');
  console.log('|---|---|---|---|');
  console.log(`| upload (scan + store) | ${(upMs / 1000).toFixed(1)} s, ${mbps(SIZE, upMs)} MB/s | clamd INSTREAM alone ${(scanMs / 1000).toFixed(1)} s, ${mbps(SIZE, scanMs)} MB/s | ${(scanMs / upMs).toFixed(2)}× |`);
  console.log(`| download | ${(downMs / 1000).toFixed(1)} s, ${mbps(SIZE, downMs)} MB/s | disk read ${(diskMs / 1000).toFixed(1)} s, ${mbps(SIZE, diskMs)} MB/s | ${(diskMs / downMs).toFixed(2)}× |`);
  console.log(`control plane RSS: ${before.toFixed(0)} MiB before, peak ${afterUpload.toFixed(0)} MiB after the upload, peak ${peak.toFixed(0)} MiB after the download (VmHWM)`);
} finally {
  await stack.stop();
  await releaseServices(SERVICES, { env: process.env, log });
}

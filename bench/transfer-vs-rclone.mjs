#!/usr/bin/env node
// Transfer benchmark: xfer against rclone, sftp → s3, on the same real servers in one run.
//
//   npm run build && node bench/transfer-vs-rclone.mjs [--small-files 2000] [--small-kib 16] [--big-mib 1024] [--concurrency 16]
//
// (a) many small files, (b) one big file. For each: xfer (control plane + agent binaries, a
// transfer created and executed through the API) and rclone (`rclone copy`, current release)
// copy the same source tree on the same sshd to fresh prefixes of the same S3 server. Prints
// files/s, MB/s, the xfer/rclone ratio and the agent's peak RSS (VmHWM). Figures, not asserts.
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startStack } from '../e2e/dist/stack.js';
import { log, peakRssMiB, sftpToS3, writeBigFile, writeSmallFiles } from './support/sftp-s3.mjs';

const { values: args } = parseArgs({
  options: {
    'small-files': { type: 'string', default: '2000' },
    'small-kib': { type: 'string', default: '16' },
    'big-mib': { type: 'string', default: '1024' },
    concurrency: { type: 'string', default: '16' },
  },
});
const SMALL_FILES = Number(args['small-files']);
const SMALL_BYTES = Number(args['small-kib']) * 1024;
const BIG_BYTES = Number(args['big-mib']) * 1024 * 1024;
const CONCURRENCY = Number(args.concurrency);

const bench = await sftpToS3('bench');
const { env: e, srcRoot } = bench;
log(`writing ${SMALL_FILES} × ${SMALL_BYTES} B and one ${BIG_BYTES} B file under ${srcRoot}`);
writeSmallFiles(join(srcRoot, 'small'), SMALL_FILES, SMALL_BYTES, Math.ceil(SMALL_FILES / 20));
await writeBigFile(join(srcRoot, 'big', 'big.bin'), BIG_BYTES);

const stack = await startStack({ env: e });
const results = [];
try {
  const agent = await stack.startAgent('bench');
  const api = stack.api;
  const conns = await bench.connections(api);
  for (const [label, dir, files, bytes] of [
    ['(a) small files', 'small', SMALL_FILES, SMALL_FILES * SMALL_BYTES],
    ['(b) one big file', 'big', 1, BIG_BYTES],
  ]) {
    // xfer: create + execute (blocks until the job ends).
    const job = await api.data('POST', '/transfers', {
      name: `bench ${dir}`, sourceConnectionId: conns.sftp, sourcePath: `/${dir}`,
      destinationConnectionId: conns.s3, destinationPath: `/xfer-${dir}`, options: { concurrency: CONCURRENCY, overwrite: 'always' },
    });
    let t0 = process.hrtime.bigint();
    const done = await api.call('POST', `/transfers/${job.id}/execute`);
    const xferSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
    if (done.status !== 200 || !done.body.success) throw new Error(`xfer ${dir} failed: ${JSON.stringify(done.body)}`);
    const xferCopied = await bench.countObjects(`xfer-${dir}/`);
    const verifiedBy = [...new Set((await api.data('GET', `/transfers/${job.id}/files?limit=1000`)).map((f) => f.verified_by))].join(', ');
    log(`${label}: xfer ${xferSeconds.toFixed(2)} s (verified by ${verifiedBy})`);

    const rcloneSeconds = await bench.rcloneCopy(dir, `rclone-${dir}`, CONCURRENCY);
    const rcloneCopied = await bench.countObjects(`rclone-${dir}/`);
    log(`${label}: rclone ${rcloneSeconds.toFixed(2)} s`);
    for (const [tool, copied] of [['xfer', xferCopied], ['rclone', rcloneCopied]]) {
      if (copied.files !== files || copied.bytes !== bytes) throw new Error(`${tool} ${dir}: copied ${copied.files} files / ${copied.bytes} B, expected ${files} / ${bytes}`);
    }
    results.push({ label, files, bytes, xferSeconds, rcloneSeconds });
  }

  const peakMiB = peakRssMiB(agent.proc.child.pid);

  const mb = (b, s) => (b / 1e6 / s).toFixed(1);
  const fps = (f, s) => (f / s).toFixed(0);
  console.log(`\nxfer vs rclone ${bench.rcloneVersion()}, sftp → s3 (OpenSSH sshd, versitygw) on loopback, concurrency ${CONCURRENCY}`);
  console.log('case               | xfer s  | rclone s | xfer files/s | rclone files/s | xfer MB/s | rclone MB/s | xfer/rclone');
  for (const r of results) {
    console.log(
      `${r.label.padEnd(18)} | ${r.xferSeconds.toFixed(2).padStart(7)} | ${r.rcloneSeconds.toFixed(2).padStart(8)} | ` +
      `${fps(r.files, r.xferSeconds).padStart(12)} | ${fps(r.files, r.rcloneSeconds).padStart(14)} | ` +
      `${mb(r.bytes, r.xferSeconds).padStart(9)} | ${mb(r.bytes, r.rcloneSeconds).padStart(11)} | ${(r.rcloneSeconds / r.xferSeconds).toFixed(2)}×`,
    );
  }
  console.log(`agent peak RSS (VmHWM): ${peakMiB.toFixed(0)} MiB`);
} finally {
  await stack.stop();
  await bench.close();
}

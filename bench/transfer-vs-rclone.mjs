#!/usr/bin/env node
// Transfer benchmark: xfer against rclone, sftp → s3, on the same real servers in one run.
//
//   npm run build && node bench/transfer-vs-rclone.mjs [--small-files 2000] [--small-kib 16] [--big-mib 1024] [--concurrency 16]
//
// (a) many small files, (b) one big file. For each: xfer (control plane + agent binaries, a
// transfer created and executed through the API) and rclone (`rclone copy`, current release)
// copy the same source tree on the same sshd to fresh prefixes of the same S3 server. Prints
// files/s, MB/s, the xfer/rclone ratio and the agent's peak RSS (VmHWM). Figures, not asserts.
import { createWriteStream, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes, randomFillSync } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CreateBucketCommand, DeleteBucketCommand, DeleteObjectsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { ensureServices, releaseServices } from '../e2e/dist/services/index.js';
import { startStack } from '../e2e/dist/stack.js';
import { ensureRclone } from '../e2e/dist/tools/rclone.js';
import { defaultCacheDir } from '@xfer/control-plane';

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
const SERVICES = ['mongodb', 'sftp', 's3'];
const log = (msg) => process.stderr.write(`bench: ${msg}\n`);

const { env } = await ensureServices(SERVICES, { env: process.env, log });
const e = { ...process.env, ...env };
const rclone = await ensureRclone({ cacheDir: defaultCacheDir(process.env), env: process.env, log });

// The source tree, written straight into the sshd user's root (same machine).
const run = randomBytes(4).toString('hex');
const srcRoot = join(e.XFER_TEST_SFTP_ROOT, `bench-${run}`);
log(`writing ${SMALL_FILES} × ${SMALL_BYTES} B and one ${BIG_BYTES} B file under ${srcRoot}`);
mkdirSync(join(srcRoot, 'small'), { recursive: true });
for (let i = 0; i < SMALL_FILES; i++) {
  const dir = join(srcRoot, 'small', `d${i % 20}`);
  if (i < 20) mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `f${i}.bin`), randomBytes(SMALL_BYTES));
}
mkdirSync(join(srcRoot, 'big'), { recursive: true });
await new Promise((resolve, reject) => {
  const out = createWriteStream(join(srcRoot, 'big', 'big.bin'));
  const chunk = Buffer.alloc(8 * 1024 * 1024);
  let left = BIG_BYTES;
  const write = () => {
    while (left > 0) {
      const n = Math.min(chunk.length, left);
      randomFillSync(chunk, 0, n);
      left -= n;
      if (!out.write(Buffer.from(chunk.subarray(0, n)))) return void out.once('drain', write);
    }
    out.end();
  };
  out.on('finish', resolve).on('error', reject);
  write();
});

const s3 = new S3Client({
  endpoint: e.XFER_TEST_S3_ENDPOINT, region: 'us-east-1', forcePathStyle: true,
  credentials: { accessKeyId: e.XFER_TEST_S3_ACCESS_KEY, secretAccessKey: e.XFER_TEST_S3_SECRET_KEY },
});
const bucket = `bench-${run}`;
await s3.send(new CreateBucketCommand({ Bucket: bucket }));

/**
 * Empties and removes the run's bucket: each run writes two copies of every case (2 GiB and more
 * by default), and a test S3 server kept up between runs would otherwise fill the disk.
 */
async function removeBucket() {
  for (;;) {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, MaxKeys: 1000 }));
    const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key }));
    if (keys.length === 0) break;
    await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys, Quiet: true } }));
  }
  await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
}

/** Objects and bytes under a prefix, to check that each tool copied everything. */
async function countObjects(prefix) {
  let token;
  let files = 0;
  let bytes = 0;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of page.Contents ?? []) {
      // Directory markers (`dir/`, which xfer writes for every directory it creates) are not files.
      if (o.Key.endsWith('/')) continue;
      files++;
      bytes += o.Size ?? 0;
    }
    token = page.NextContinuationToken;
  } while (token);
  return { files, bytes };
}

const stack = await startStack({ env: e });
const results = [];
try {
  const agent = await stack.startAgent('bench');
  const api = stack.api;
  const sftpConn = await api.data('POST', '/connections', {
    name: 'bench-sftp', type: 'sftp', host: e.XFER_TEST_SFTP_HOST, port: Number(e.XFER_TEST_SFTP_PORT), path: srcRoot,
    credentials: { username: e.XFER_TEST_SFTP_USER, password: e.XFER_TEST_SFTP_PASSWORD },
  });
  const s3Conn = await api.data('POST', '/connections', {
    name: 'bench-s3', type: 's3', host: e.XFER_TEST_S3_HOST, port: Number(e.XFER_TEST_S3_PORT), path: `/${bucket}`,
    options: { secure: false, force_path_style: true },
    credentials: { access_key_id: e.XFER_TEST_S3_ACCESS_KEY, secret_access_key: e.XFER_TEST_S3_SECRET_KEY, region: 'us-east-1' },
  });

  const obscured = spawnSync(rclone, ['obscure', e.XFER_TEST_SFTP_PASSWORD], { encoding: 'utf8' }).stdout.trim();
  const rcloneEnv = {
    ...process.env,
    RCLONE_CONFIG_SRC_TYPE: 'sftp', RCLONE_CONFIG_SRC_HOST: e.XFER_TEST_SFTP_HOST, RCLONE_CONFIG_SRC_PORT: e.XFER_TEST_SFTP_PORT,
    RCLONE_CONFIG_SRC_USER: e.XFER_TEST_SFTP_USER, RCLONE_CONFIG_SRC_PASS: obscured,
    RCLONE_CONFIG_DST_TYPE: 's3', RCLONE_CONFIG_DST_PROVIDER: 'Other', RCLONE_CONFIG_DST_ENDPOINT: e.XFER_TEST_S3_ENDPOINT,
    RCLONE_CONFIG_DST_ACCESS_KEY_ID: e.XFER_TEST_S3_ACCESS_KEY, RCLONE_CONFIG_DST_SECRET_ACCESS_KEY: e.XFER_TEST_S3_SECRET_KEY,
    RCLONE_CONFIG_DST_FORCE_PATH_STYLE: 'true', RCLONE_CONFIG_DST_REGION: 'us-east-1',
  };

  for (const [label, dir, files, bytes] of [
    ['(a) small files', 'small', SMALL_FILES, SMALL_FILES * SMALL_BYTES],
    ['(b) one big file', 'big', 1, BIG_BYTES],
  ]) {
    // xfer: create + execute (blocks until the job ends).
    const job = await api.data('POST', '/transfers', {
      name: `bench ${dir}`, sourceConnectionId: sftpConn.id, sourcePath: `/${dir}`,
      destinationConnectionId: s3Conn.id, destinationPath: `/xfer-${dir}`, options: { concurrency: CONCURRENCY, overwrite: 'always' },
    });
    let t0 = process.hrtime.bigint();
    const done = await api.call('POST', `/transfers/${job.id}/execute`);
    const xferSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
    if (done.status !== 200 || !done.body.success) throw new Error(`xfer ${dir} failed: ${JSON.stringify(done.body)}`);
    const xferCopied = await countObjects(`xfer-${dir}/`);
    const verifiedBy = [...new Set((await api.data('GET', `/transfers/${job.id}/files?limit=1000`)).map((f) => f.verified_by))].join(', ');
    log(`${label}: xfer ${xferSeconds.toFixed(2)} s (verified by ${verifiedBy})`);

    t0 = process.hrtime.bigint();
    const rc = spawnSync(rclone, ['copy', `src:${join(srcRoot, dir)}`, `dst:${bucket}/rclone-${dir}`, '--transfers', String(CONCURRENCY),
      '--checkers', String(CONCURRENCY * 2), '--s3-upload-concurrency', '4'], { env: rcloneEnv, encoding: 'utf8' });
    const rcloneSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
    if (rc.status !== 0) throw new Error(`rclone ${dir} failed: ${rc.stderr}`);
    const rcloneCopied = await countObjects(`rclone-${dir}/`);
    log(`${label}: rclone ${rcloneSeconds.toFixed(2)} s`);
    for (const [tool, copied] of [['xfer', xferCopied], ['rclone', rcloneCopied]]) {
      if (copied.files !== files || copied.bytes !== bytes) throw new Error(`${tool} ${dir}: copied ${copied.files} files / ${copied.bytes} B, expected ${files} / ${bytes}`);
    }
    results.push({ label, files, bytes, xferSeconds, rcloneSeconds });
  }

  const status = readFileSync(`/proc/${agent.proc.child.pid}/status`, 'utf8');
  const peakKiB = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN);

  const mb = (b, s) => (b / 1e6 / s).toFixed(1);
  const fps = (f, s) => (f / s).toFixed(0);
  console.log(`\nxfer vs rclone ${spawnSync(rclone, ['version'], { encoding: 'utf8' }).stdout.split('\n')[0]}, sftp → s3 (OpenSSH sshd, versitygw) on loopback, concurrency ${CONCURRENCY}`);
  console.log('case               | xfer s  | rclone s | xfer files/s | rclone files/s | xfer MB/s | rclone MB/s | xfer/rclone');
  for (const r of results) {
    console.log(
      `${r.label.padEnd(18)} | ${r.xferSeconds.toFixed(2).padStart(7)} | ${r.rcloneSeconds.toFixed(2).padStart(8)} | ` +
      `${fps(r.files, r.xferSeconds).padStart(12)} | ${fps(r.files, r.rcloneSeconds).padStart(14)} | ` +
      `${mb(r.bytes, r.xferSeconds).padStart(9)} | ${mb(r.bytes, r.rcloneSeconds).padStart(11)} | ${(r.rcloneSeconds / r.xferSeconds).toFixed(2)}×`,
    );
  }
  console.log(`agent peak RSS (VmHWM): ${(peakKiB / 1024).toFixed(0)} MiB`);
} finally {
  await stack.stop();
  rmSync(srcRoot, { recursive: true, force: true });
  await removeBucket().catch((err) => log(`could not remove bucket ${bucket}: ${err.message}`));
  await releaseServices(SERVICES, { env: process.env, log });
}

// What the sftp → s3 benchmarks share: the test services, rclone, a source directory on the test
// sshd, a bucket of the run's own on the test S3 server, xfer's connections to both, rclone's
// remotes for the same servers, and figures read from /proc.
import { createWriteStream, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes, randomFillSync } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { CreateBucketCommand, DeleteBucketCommand, DeleteObjectsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { ensureServices, releaseServices } from '../../e2e/dist/services/index.js';
import { ensureRclone } from '../../e2e/dist/tools/rclone.js';
import { defaultCacheDir } from '@xfer/control-plane';

const SERVICES = ['mongodb', 'sftp', 's3'];
export const log = (msg) => process.stderr.write(`bench: ${msg}\n`);

/**
 * Starts (or reuses) the services, fetches rclone, makes the run's source directory below the
 * sshd user's root (`srcRoot`) and bucket. `close()` removes both and releases the services.
 */
export async function sftpToS3(name) {
  const { env } = await ensureServices(SERVICES, { env: process.env, log });
  const e = { ...process.env, ...env };
  const rclone = await ensureRclone({ cacheDir: defaultCacheDir(process.env), env: process.env, log });
  const run = randomBytes(4).toString('hex');
  const srcRoot = join(e.XFER_TEST_SFTP_ROOT, `${name}-${run}`);
  mkdirSync(srcRoot, { recursive: true });
  const s3 = new S3Client({
    endpoint: e.XFER_TEST_S3_ENDPOINT, region: 'us-east-1', forcePathStyle: true,
    credentials: { accessKeyId: e.XFER_TEST_S3_ACCESS_KEY, secretAccessKey: e.XFER_TEST_S3_SECRET_KEY },
  });
  const bucket = `${name}-${run}`;
  await s3.send(new CreateBucketCommand({ Bucket: bucket }));

  const obscured = spawnSync(rclone, ['obscure', e.XFER_TEST_SFTP_PASSWORD], { encoding: 'utf8' }).stdout.trim();
  const rcloneEnv = {
    ...process.env,
    RCLONE_CONFIG_SRC_TYPE: 'sftp', RCLONE_CONFIG_SRC_HOST: e.XFER_TEST_SFTP_HOST, RCLONE_CONFIG_SRC_PORT: e.XFER_TEST_SFTP_PORT,
    RCLONE_CONFIG_SRC_USER: e.XFER_TEST_SFTP_USER, RCLONE_CONFIG_SRC_PASS: obscured,
    RCLONE_CONFIG_DST_TYPE: 's3', RCLONE_CONFIG_DST_PROVIDER: 'Other', RCLONE_CONFIG_DST_ENDPOINT: e.XFER_TEST_S3_ENDPOINT,
    RCLONE_CONFIG_DST_ACCESS_KEY_ID: e.XFER_TEST_S3_ACCESS_KEY, RCLONE_CONFIG_DST_SECRET_ACCESS_KEY: e.XFER_TEST_S3_SECRET_KEY,
    RCLONE_CONFIG_DST_FORCE_PATH_STYLE: 'true', RCLONE_CONFIG_DST_REGION: 'us-east-1',
  };
  const rcloneArgs = (dir, prefix, concurrency) => ['copy', `src:${join(srcRoot, dir)}`, `dst:${bucket}/${prefix}`, '--transfers', String(concurrency),
    '--checkers', String(concurrency * 2), '--s3-upload-concurrency', '4'];

  return {
    env: e, rclone, srcRoot, bucket, s3,
    /** rclone's environment: remotes `src:` (the sshd) and `dst:` (the S3 server). */
    rcloneEnv,
    rcloneVersion: () => spawnSync(rclone, ['version'], { encoding: 'utf8' }).stdout.split('\n')[0],

    /**
     * Creates the sftp connection (base `srcRoot`) and the s3 connection (the bucket) through the
     * API; `extra` goes into both bodies, `sides.sftp` and `sides.s3` into one each (e.g. each pinned
     * to its own agent), `sides.suffix` into both names (a second pair of the same run).
     */
    async connections(api, extra = {}, sides = {}) {
      const suffix = sides.suffix ? `-${sides.suffix}` : '';
      const sftp = await api.data('POST', '/connections', {
        name: `${name}-sftp-${run}${suffix}`, type: 'sftp', host: e.XFER_TEST_SFTP_HOST, port: Number(e.XFER_TEST_SFTP_PORT), path: srcRoot,
        credentials: { username: e.XFER_TEST_SFTP_USER, password: e.XFER_TEST_SFTP_PASSWORD }, ...extra, ...sides.sftp,
      });
      const s3conn = await api.data('POST', '/connections', {
        name: `${name}-s3-${run}${suffix}`, type: 's3', host: e.XFER_TEST_S3_HOST, port: Number(e.XFER_TEST_S3_PORT), path: `/${bucket}`,
        options: { secure: false, force_path_style: true },
        credentials: { access_key_id: e.XFER_TEST_S3_ACCESS_KEY, secret_access_key: e.XFER_TEST_S3_SECRET_KEY, region: 'us-east-1' }, ...extra, ...sides.s3,
      });
      return { sftp: sftp.id, s3: s3conn.id };
    },

    /** `rclone copy src:srcRoot/dir dst:bucket/prefix`, as fast as it goes with `concurrency` transfers; resolves with its seconds. */
    async rcloneCopy(dir, prefix, concurrency) {
      const t0 = process.hrtime.bigint();
      const child = spawn(rclone, rcloneArgs(dir, prefix, concurrency), { env: rcloneEnv, stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-10_000); });
      const code = await new Promise((resolve) => child.once('exit', resolve));
      if (code !== 0) throw new Error(`rclone ${dir} failed (${code}): ${stderr}`);
      return Number(process.hrtime.bigint() - t0) / 1e9;
    },

    /** `rclone lsf --files-only src:srcRoot/dir` (one listing of the directory); resolves with its seconds and the names it printed. */
    async rcloneList(dir) {
      const t0 = process.hrtime.bigint();
      const child = spawn(rclone, ['lsf', '--files-only', `src:${join(srcRoot, dir)}`], { env: rcloneEnv, stdio: ['ignore', 'pipe', 'pipe'] });
      let names = 0;
      let stderr = '';
      child.stdout.on('data', (d) => { names += String(d).split('\n').length - 1; });
      child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-10_000); });
      const code = await new Promise((resolve) => child.once('exit', resolve));
      if (code !== 0) throw new Error(`rclone lsf ${dir} failed (${code}): ${stderr}`);
      return { seconds: Number(process.hrtime.bigint() - t0) / 1e9, names };
    },

    /** Objects and bytes under a prefix (directory markers, which xfer writes, are not files). */
    async countObjects(prefix) {
      let token;
      let files = 0;
      let bytes = 0;
      do {
        const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
        for (const o of page.Contents ?? []) {
          if (o.Key.endsWith('/')) continue;
          files++;
          bytes += o.Size ?? 0;
        }
        token = page.NextContinuationToken;
      } while (token);
      return { files, bytes };
    },

    /**
     * Removes the source directory and empties and removes the bucket (a test S3 server kept up
     * between runs would otherwise fill the disk), then releases the services.
     */
    async close() {
      rmSync(srcRoot, { recursive: true, force: true });
      try {
        for (;;) {
          const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, MaxKeys: 1000 }));
          const keys = (page.Contents ?? []).map((o) => ({ Key: o.Key }));
          if (keys.length === 0) break;
          await s3.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys, Quiet: true } }));
        }
        await s3.send(new DeleteBucketCommand({ Bucket: bucket }));
      } catch (err) {
        log(`could not remove bucket ${bucket}: ${err.message}`);
      }
      await releaseServices(SERVICES, { env: process.env, log });
    },
  };
}

/** Writes `count` files of `bytes` random bytes each below `root`, `perDir` to a directory (d0/f0.bin …). */
export function writeSmallFiles(root, count, bytes, perDir = 1000) {
  for (let i = 0; i < count; i++) {
    const dir = join(root, `d${Math.floor(i / perDir)}`);
    if (i % perDir === 0) mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `f${i}.bin`), randomBytes(bytes));
  }
}

/** Writes one file of `bytes` random bytes at `path`, 8 MiB at a time (never the whole file in memory). */
export async function writeBigFile(path, bytes) {
  mkdirSync(dirname(path), { recursive: true });
  await new Promise((resolve, reject) => {
    const out = createWriteStream(path);
    const chunk = Buffer.alloc(8 * 1024 * 1024);
    let left = bytes;
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
}

/** Peak resident memory (VmHWM) of a running process, in MiB. */
export function peakRssMiB(pid) {
  return statusKiB(pid, 'VmHWM') / 1024;
}

/** Resident memory (VmRSS) of a running process now, in MiB. */
export function rssMiB(pid) {
  return statusKiB(pid, 'VmRSS') / 1024;
}

function statusKiB(pid, field) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? NaN);
}

/** CPU seconds (user + system) a running process has used so far. */
export function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
  // After the command name: utime and stime are the 12th and 13th fields (in clock ticks, 100 a second on Linux).
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * CPU seconds (user + system) of every process now, by pid, with its command name: two snapshots
 * give what each process (sshd, versitygw, FerretDB, someone else's tests) used in between, for
 * where the machine's CPU went. sshd's count those of its reaped children too: a session's
 * processes (sftp-server among them) end with it, before the second snapshot. A process that
 * started and ended in between is missed.
 */
export function cpuSnapshot() {
  const snapshot = new Map();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = /\((.*)\) /.exec(stat)?.[1] ?? '?';
      const f = stat.replace(/^.*\) /, '').split(' ');
      const children = comm === 'sshd' ? Number(f[13]) + Number(f[14]) : 0;
      snapshot.set(Number(pid), { comm, seconds: (Number(f[11]) + Number(f[12]) + children) / 100 });
    } catch {
      // Gone meanwhile.
    }
  }
  return snapshot;
}

/** CPU seconds used between two snapshots, by name (`names` names some pids; others go by command), largest first. */
export function cpuBetween(before, after, names = {}) {
  const used = new Map();
  for (const [pid, { comm, seconds }] of after) {
    const delta = seconds - (before.get(pid)?.seconds ?? 0);
    if (delta <= 0) continue;
    const name = names[pid] ?? comm;
    used.set(name, (used.get(name) ?? 0) + delta);
  }
  return [...used].sort((a, b) => b[1] - a[1]);
}

/** The 1, 5 and 15 minute load averages, for the report (the machine is shared). */
export const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');

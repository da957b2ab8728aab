// What the sftp → s3 benchmarks share: the test services, rclone, a source directory on the test
// sshd, a bucket of the run's own on the test S3 server, xfer's connections to both, rclone's
// remotes for the same servers (files.mjs and proc.mjs re-exported).
import { mkdirSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { CreateBucketCommand, DeleteBucketCommand, DeleteObjectsCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { ensureServices, releaseServices } from '../../e2e/dist/services/index.js';
import { ensureRclone } from '../../e2e/dist/tools/rclone.js';
import { defaultCacheDir } from '@xfer/control-plane';
import { log } from './proc.mjs';

// The general helpers, for the benches that import them from here.
export * from './files.mjs';
export * from './proc.mjs';

const SERVICES = ['mongodb', 'sftp', 's3'];

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

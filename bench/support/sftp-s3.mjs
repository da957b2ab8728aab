// What the sftp → s3 benchmarks share: the test services, rclone, a source directory on the test
// sshd, a bucket of the run's own on the test S3 server, xfer's connections to both, rclone's
// remotes for the same servers (files.mjs and proc.mjs re-exported).
import { randomBytes } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { ensureServices, releaseServices } from '../../e2e/dist/services/index.js';
import { ensureRclone } from '../../e2e/dist/tools/rclone.js';
import { defaultCacheDir } from '@xfer/control-plane';
import { apiBody, endpoint, LOOPBACK, prefixed, timed } from './endpoints.mjs';
import { log } from './proc.mjs';

// The general helpers, for the benches that import them from here.
export * from './files.mjs';
export * from './proc.mjs';

const SERVICES = ['mongodb', 'sftp', 's3'];

/**
 * Starts (or reuses) the services, fetches rclone, makes the run's source directory below the
 * sshd user's root (`srcRoot`) and bucket (the sftp and s3 endpoints of endpoints.mjs, on
 * loopback). `close()` removes both and releases the services.
 */
export async function sftpToS3(name) {
  const { env } = await ensureServices(SERVICES, { env: process.env, log });
  const e = { ...process.env, ...env };
  const rclone = await ensureRclone({ cacheDir: defaultCacheDir(process.env), env: process.env, log });
  const run = randomBytes(4).toString('hex');
  const sftp = await endpoint('sftp', e, `${name}-${run}`, rclone);
  const store = await endpoint('s3', e, `${name}-${run}`, rclone);
  const srcRoot = sftp.area;
  const { bucket } = store;
  const rcloneEnv = { ...process.env, ...prefixed('SRC', (await sftp.rclone(LOOPBACK, '')).config), ...prefixed('DST', (await store.rclone(LOOPBACK, '')).config) };
  const rcloneArgs = (dir, prefix, concurrency) => ['copy', `src:${join(srcRoot, dir)}`, `dst:${bucket}/${prefix}`, '--transfers', String(concurrency),
    '--checkers', String(concurrency * 2), '--s3-upload-concurrency', '4'];

  return {
    env: e, rclone, srcRoot, bucket, s3: store.client,
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
      const sftpConn = await api.data('POST', '/connections', { ...apiBody(await sftp.settings(LOOPBACK)), name: `${name}-sftp-${run}${suffix}`, ...extra, ...sides.sftp });
      const s3Conn = await api.data('POST', '/connections', { ...apiBody(await store.settings(LOOPBACK)), name: `${name}-s3-${run}${suffix}`, ...extra, ...sides.s3 });
      return { sftp: sftpConn.id, s3: s3Conn.id };
    },

    /** `rclone copy src:srcRoot/dir dst:bucket/prefix`, as fast as it goes with `concurrency` transfers; resolves with its seconds. */
    async rcloneCopy(dir, prefix, concurrency) {
      return timed(rclone, rcloneArgs(dir, prefix, concurrency), { env: rcloneEnv });
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

    /** Objects and bytes under a key prefix (directory markers, which xfer writes, are not files). */
    countObjects: (prefix) => store.countPrefix(prefix),

    /**
     * Removes the source directory and empties and removes the bucket (a test S3 server kept up
     * between runs would otherwise fill the disk), then releases the services.
     */
    async close() {
      await sftp.close();
      await store.close();
      await releaseServices(SERVICES, { env: process.env, log });
    },
  };
}

import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { acceptsTcp, startServerProcess } from '@xfer/control-plane/process';
import { ensureRclone, RCLONE_VERSION } from '../tools/rclone.js';
import type { ServiceDefinition } from './types.js';

/**
 * A real WebDAV server: `rclone serve webdav` (the current rclone the benchmarks fetch and cache,
 * not Debian's 1.60) over a directory in the data dir, plain HTTP on a free 127.0.0.1 port, one
 * user with Basic auth and a password random per start.
 */
export const webdav: ServiceDefinition = {
  name: 'webdav',
  summary: `WebDAV (rclone ${RCLONE_VERSION} serve webdav over a directory)`,
  provides: ['XFER_TEST_WEBDAV_HOST', 'XFER_TEST_WEBDAV_PORT', 'XFER_TEST_WEBDAV_USER', 'XFER_TEST_WEBDAV_PASSWORD', 'XFER_TEST_WEBDAV_ROOT', 'XFER_TEST_RCLONE'],
  async install(ctx) {
    await ensureRclone(ctx);
  },
  async start(ctx) {
    const bin = await ensureRclone(ctx);
    const root = join(ctx.dataDir, 'root');
    await mkdir(root);
    const user = 'xfer';
    const password = randomBytes(18).toString('base64url');
    const { pid, port } = await startServerProcess({
      name: 'rclone serve webdav',
      bin,
      // `--config ''`: no rclone.conf of the machine's user is read. The data dir names the process.
      args: (port) => ['serve', 'webdav', root, '--addr', `127.0.0.1:${port}`, '--config', '', '--log-level', 'NOTICE'],
      logPath: join(ctx.dataDir, 'rclone-webdav.log'),
      // Credentials through the environment (rclone reads RCLONE_<FLAG>), never the process list.
      env: { ...ctx.env, RCLONE_USER: user, RCLONE_PASS: password },
      timeoutMs: 15_000,
    });
    return {
      pid,
      env: {
        XFER_TEST_WEBDAV_HOST: '127.0.0.1',
        XFER_TEST_WEBDAV_PORT: String(port),
        XFER_TEST_WEBDAV_USER: user,
        XFER_TEST_WEBDAV_PASSWORD: password,
        // The served directory, to read through the file system. Not to write test data in: rclone's
        // VFS sees only changes made through it and keeps a directory listing for --dir-cache-time
        // (5 min), so what is made on disk under an already listed directory stays invisible that
        // long (agent/test/ordered-listing.test.ts writes over WebDAV for this). Not
        // `--dir-cache-time 0` either: rclone 1.75 re-arms its directory cleanup timer at twice that
        // time, and at 0 it spins (thousands of goroutines, every request hung).
        XFER_TEST_WEBDAV_ROOT: root,
        // The rclone binary itself, for tests that check xfer against rclone without reaching e2e's tools.
        XFER_TEST_RCLONE: bin,
      },
    };
  },
  isHealthy: (record) => acceptsTcp(Number(record.env.XFER_TEST_WEBDAV_PORT)),
};

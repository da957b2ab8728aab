import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { access, constants, mkdir, mkdtemp, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { acceptsTcp, findExecutable, startServerProcess, stopPid } from '@xfer/control-plane/process';
import type { Env, ServiceContext, ServiceDefinition } from './types.js';

/** The versitygw release the S3-family connectors are tested against (S3 gateway over a POSIX dir). */
export const VERSITYGW_VERSION = 'v1.8.0';
const VERSITYGW_PACKAGE = 'github.com/versity/versitygw/cmd/versitygw';

/**
 * A real S3 server: versitygw over a directory in the data dir, root credentials random per
 * start, plus a second account with the plain `user` role that owns no bucket (where tests
 * provoke AccessDenied). Serves s3, r2 and gcs connections alike (one S3 implementation).
 * The binary is built once with Go into `<cacheDir>/bin`.
 */
export const s3: ServiceDefinition = {
  name: 's3',
  summary: `S3 API (versitygw ${VERSITYGW_VERSION.slice(1)} over a POSIX dir)`,
  provides: ['XFER_TEST_S3_ENDPOINT', 'XFER_TEST_S3_ACCESS_KEY', 'XFER_TEST_S3_SECRET_KEY'],
  async install(ctx) {
    await ensureVersitygw(ctx);
  },
  async start(ctx) {
    const bin = await ensureVersitygw(ctx);
    const accessKey = `xfer${randomBytes(6).toString('hex')}`;
    const secretKey = randomBytes(24).toString('base64url');
    const data = join(ctx.dataDir, 'data');
    const iam = join(ctx.dataDir, 'iam');
    await mkdir(data);
    await mkdir(iam);
    // The server's access log (one line per request: operation, key, bytes sent): how a test shows
    // which requests a server-side copy made, and that no byte of it was read out.
    const accessLog = join(ctx.dataDir, 'access.log');
    const { pid, port } = await startServerProcess({
      name: 'versitygw',
      bin,
      // --keep-alive: versitygw closes every connection after one request unless told otherwise;
      // the S3 services it stands in for keep connections open, and a TCP handshake per object is
      // not what a client pays against them.
      args: (port) => ['--port', `127.0.0.1:${port}`, '--iam-dir', iam, '--quiet', '--keep-alive', '--access-log', accessLog, 'posix', data],
      logPath: join(ctx.dataDir, 'versitygw.log'),
      // Credentials through the environment, so they do not show in the process list.
      env: { ...ctx.env, ROOT_ACCESS_KEY: accessKey, ROOT_SECRET_KEY: secretKey },
      timeoutMs: 15_000,
    });
    const endpoint = `http://127.0.0.1:${port}`;
    const limitedAccessKey = `xferuser${randomBytes(4).toString('hex')}`;
    const limitedSecretKey = randomBytes(24).toString('base64url');
    try {
      runChecked(bin, ['admin', '--endpoint-url', endpoint, 'create-user', '--access', limitedAccessKey, '--secret', limitedSecretKey, '--role', 'user'], {
        ...ctx.env, ADMIN_ACCESS_KEY: accessKey, ADMIN_SECRET_KEY: secretKey,
      });
    } catch (err) {
      await stopPid(pid);
      throw err;
    }
    return {
      pid,
      env: {
        XFER_TEST_S3_ENDPOINT: endpoint,
        XFER_TEST_S3_HOST: '127.0.0.1',
        XFER_TEST_S3_PORT: String(port),
        XFER_TEST_S3_REGION: 'us-east-1',
        XFER_TEST_S3_ACCESS_KEY: accessKey,
        XFER_TEST_S3_SECRET_KEY: secretKey,
        XFER_TEST_S3_LIMITED_ACCESS_KEY: limitedAccessKey,
        XFER_TEST_S3_LIMITED_SECRET_KEY: limitedSecretKey,
        XFER_TEST_S3_ACCESS_LOG: accessLog,
      },
    };
  },
  isHealthy: (record) => acceptsTcp(Number(record.env.XFER_TEST_S3_PORT)),
};

function cachedVersitygwPath(cacheDir: string): string {
  return join(cacheDir, 'bin', `versitygw-${VERSITYGW_VERSION}`);
}

/** The cached versitygw binary, built first with `go install` (about a minute) when missing. */
async function ensureVersitygw(ctx: ServiceContext): Promise<string> {
  const target = cachedVersitygwPath(ctx.cacheDir);
  if (await access(target, constants.X_OK).then(() => true, () => false)) return target;
  const go = findExecutable('go', ctx.env) ?? findExecutable('go', { ...ctx.env, PATH: `${ctx.env.PATH ?? ''}:/usr/local/go/bin` });
  if (!go) throw new Error(`versitygw is not built (${target}) and Go is not on PATH to build it`);
  ctx.log(`s3: building versitygw ${VERSITYGW_VERSION.slice(1)} once into ${join(ctx.cacheDir, 'bin')} (about a minute)`);
  await mkdir(join(ctx.cacheDir, 'bin'), { recursive: true });
  // GOBIN inside the cache dir, so the finished binary is renamed within one file system.
  const work = await mkdtemp(join(ctx.cacheDir, 'bin', '.versitygw-build-'));
  try {
    runChecked(go, ['install', '-trimpath', `${VERSITYGW_PACKAGE}@${VERSITYGW_VERSION}`], { ...ctx.env, GOBIN: work }, work);
    // Renamed in only when complete, so an interrupted build never leaves a broken binary.
    await rename(join(work, 'versitygw'), target);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return target;
}

function runChecked(cmd: string, args: string[], env: Env, cwd?: string): void {
  const result = spawnSync(cmd, args, { cwd, env: env as NodeJS.ProcessEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  if (result.error) throw new Error(`${cmd}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`${cmd} ${args[0]} failed (exit ${result.status}):\n${(result.stderr || result.stdout).slice(-3000).trim()}`);
}

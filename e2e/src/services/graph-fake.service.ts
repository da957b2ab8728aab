import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { chmod, mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { acceptsTcp, startServerProcess } from '@xfer/control-plane/process';
import type { ServiceDefinition } from './types.js';

/** The built fake's entry point (e2e/dist/fakes/graph/graph-fake.main.js). */
const MAIN = join(dirname(fileURLToPath(import.meta.url)), '..', 'fakes', 'graph', 'graph-fake.main.js');

/**
 * A FAKE of Microsoft Graph's drive API and of the Microsoft identity platform's token endpoint
 * (e2e/src/fakes/graph/): no emulator of OneDrive exists. HTTPS on a free 127.0.0.1 port with a
 * self-signed certificate made per start (tests trust it explicitly through
 * XFER_TEST_ONEDRIVE_CA_FILE), one app registration with a random tenant, client id, secret and
 * initial refresh token, the drive stored in a directory of the data dir. Serves `onedrive`
 * connections.
 */
export const onedrive: ServiceDefinition = {
  name: 'onedrive',
  summary: 'Microsoft Graph drive API and token endpoint (a FAKE written from Microsoft\'s documentation)',
  provides: [
    'XFER_TEST_ONEDRIVE_HOST', 'XFER_TEST_ONEDRIVE_PORT', 'XFER_TEST_ONEDRIVE_TENANT', 'XFER_TEST_ONEDRIVE_CLIENT_ID',
    'XFER_TEST_ONEDRIVE_CLIENT_SECRET', 'XFER_TEST_ONEDRIVE_REFRESH_TOKEN', 'XFER_TEST_ONEDRIVE_ROOT', 'XFER_TEST_ONEDRIVE_CA_FILE',
  ],
  async start(ctx) {
    const d = ctx.dataDir;
    await mkdir(join(d, 'drive'));
    await mkdir(join(d, 'staging'));
    const cert = join(d, 'cert.pem');
    const key = join(d, 'key.pem');
    const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '30',
      '-subj', '/CN=Microsoft Graph FAKE', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert],
    { env: ctx.env as NodeJS.ProcessEnv, encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`openssl req failed: ${made.stderr}`);
    await chmod(key, 0o600);
    const app = {
      tenant: `fake-tenant-${randomBytes(4).toString('hex')}`,
      clientId: `fake-client-${randomBytes(4).toString('hex')}`,
      clientSecret: randomBytes(24).toString('base64url'),
      refreshToken: `0.FAKE.${randomBytes(48).toString('base64url')}`,
    };
    const { pid, port } = await startServerProcess({
      name: 'graph fake',
      bin: process.execPath,
      // The data dir names the process (how a recycled pid is told apart from it).
      args: (port) => [MAIN, '--port', String(port), '--data-dir', d],
      logPath: join(d, 'graph-fake.log'),
      // The app's secrets through the environment, never the process list.
      env: {
        ...ctx.env, GRAPH_FAKE_TENANT: app.tenant, GRAPH_FAKE_CLIENT_ID: app.clientId,
        GRAPH_FAKE_CLIENT_SECRET: app.clientSecret, GRAPH_FAKE_REFRESH_TOKEN: app.refreshToken,
      },
      timeoutMs: 15_000,
    });
    return {
      pid,
      env: {
        XFER_TEST_ONEDRIVE_HOST: '127.0.0.1',
        XFER_TEST_ONEDRIVE_PORT: String(port),
        XFER_TEST_ONEDRIVE_TENANT: app.tenant,
        XFER_TEST_ONEDRIVE_CLIENT_ID: app.clientId,
        XFER_TEST_ONEDRIVE_CLIENT_SECRET: app.clientSecret,
        XFER_TEST_ONEDRIVE_REFRESH_TOKEN: app.refreshToken,
        // The drive on disk: the conformance suite's raw side reads and writes it directly.
        XFER_TEST_ONEDRIVE_ROOT: join(d, 'drive'),
        XFER_TEST_ONEDRIVE_CA_FILE: cert,
      },
    };
  },
  isHealthy: (record) => acceptsTcp(Number(record.env.XFER_TEST_ONEDRIVE_PORT)),
};

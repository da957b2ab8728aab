import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { acceptsTcp, startServerProcess } from '@xfer/control-plane/process';
import type { ServiceDefinition } from './types.js';

const require = createRequire(import.meta.url);

/** Azurite's blob server: the e2e package's dev dependency (Microsoft's Azure Storage emulator). */
function azuriteBlobMain(): { main: string; root: string } {
  const root = dirname(require.resolve('azurite/package.json'));
  return { main: join(root, 'dist', 'src', 'blob', 'main.js'), root };
}

/**
 * A real Azure Blob Storage API: Azurite's blob server over a directory in the data dir, with an
 * account of its own (random name and key per start, through AZURITE_ACCOUNTS, so that the
 * well-known development key opens nothing), telemetry off, and any API version accepted (the
 * SDK may be newer than the emulator). Serves `blob` connections.
 */
export const blob: ServiceDefinition = {
  name: 'blob',
  summary: 'Azure Blob Storage API (Azurite)',
  provides: ['XFER_TEST_BLOB_CONNECTION_STRING', 'XFER_TEST_BLOB_ACCOUNT', 'XFER_TEST_BLOB_KEY', 'XFER_TEST_BLOB_ENDPOINT'],
  async start(ctx) {
    const { main, root } = azuriteBlobMain();
    const version = (JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as { version: string }).version;
    ctx.log(`blob: Azurite ${version}`);
    const account = `xfer${randomBytes(4).toString('hex')}`;
    const key = randomBytes(32).toString('base64');
    const { pid, port } = await startServerProcess({
      name: 'azurite-blob',
      bin: process.execPath,
      args: (port) => [main, '--blobHost', '127.0.0.1', '--blobPort', String(port), '--location', ctx.dataDir, '--silent', '--skipApiVersionCheck', '--disableTelemetry'],
      logPath: join(ctx.dataDir, 'azurite.log'),
      // The account and key through the environment, so they do not show in the process list.
      env: { ...ctx.env, AZURITE_ACCOUNTS: `${account}:${key}` },
      timeoutMs: 20_000,
    });
    const endpoint = `http://127.0.0.1:${port}/${account}`;
    return {
      pid,
      env: {
        XFER_TEST_BLOB_CONNECTION_STRING: `DefaultEndpointsProtocol=http;AccountName=${account};AccountKey=${key};BlobEndpoint=${endpoint};`,
        XFER_TEST_BLOB_ENDPOINT: endpoint,
        XFER_TEST_BLOB_HOST: '127.0.0.1',
        XFER_TEST_BLOB_PORT: String(port),
        XFER_TEST_BLOB_ACCOUNT: account,
        XFER_TEST_BLOB_KEY: key,
      },
    };
  },
  isHealthy: (record) => acceptsTcp(Number(record.env.XFER_TEST_BLOB_PORT)),
};

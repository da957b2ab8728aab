import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { acceptsTcp, startServerProcess } from '@xfer/control-plane/process';
import type { ServiceDefinition } from './types.js';

/** The fake's entry point, built beside this file (e2e/dist/fakes/azure-files/main.js). */
const FAKE_MAIN = join(dirname(fileURLToPath(import.meta.url)), '..', 'fakes', 'azure-files', 'main.js');

/**
 * A FAKE of the Azure Files REST API (e2e/src/fakes/azure-files/): no emulator of the File service
 * exists (Azurite has none), so this is our own implementation of the operations the fileshare
 * connector uses, from Microsoft's REST reference, with Shared Key signatures checked. An account
 * of its own (random name and key per start, through the environment, not the process list);
 * shares and files in a directory of the data dir. Serves `fileshare` connections.
 */
export const fileshare: ServiceDefinition = {
  name: 'fileshare',
  summary: 'Azure Files REST API (a faithful FAKE written from Microsoft\'s docs: no emulator exists)',
  provides: ['XFER_TEST_FILESHARE_CONNECTION_STRING', 'XFER_TEST_FILESHARE_ENDPOINT', 'XFER_TEST_FILESHARE_PORT', 'XFER_TEST_FILESHARE_ACCOUNT', 'XFER_TEST_FILESHARE_KEY', 'XFER_TEST_FILESHARE_ROOT'],
  async start(ctx) {
    const account = `xfer${randomBytes(4).toString('hex')}`;
    const key = randomBytes(64).toString('base64');
    const root = join(ctx.dataDir, 'files');
    await mkdir(root, { recursive: true });
    const { pid, port } = await startServerProcess({
      name: 'azure-files-fake',
      bin: process.execPath,
      args: (port) => [FAKE_MAIN, '--root', root, '--port', String(port)],
      logPath: join(ctx.dataDir, 'azure-files-fake.log'),
      env: { ...ctx.env, XFER_FAKE_AZURE_FILES_ACCOUNT: account, XFER_FAKE_AZURE_FILES_KEY: key },
      timeoutMs: 20_000,
    });
    const endpoint = `http://127.0.0.1:${port}/${account}`;
    return {
      pid,
      env: {
        XFER_TEST_FILESHARE_CONNECTION_STRING: `DefaultEndpointsProtocol=http;AccountName=${account};AccountKey=${key};FileEndpoint=${endpoint};`,
        XFER_TEST_FILESHARE_ENDPOINT: endpoint,
        XFER_TEST_FILESHARE_PORT: String(port),
        XFER_TEST_FILESHARE_ACCOUNT: account,
        XFER_TEST_FILESHARE_KEY: key,
        // Shares are directories below it (the fake's storage, for tests that look at the disk).
        XFER_TEST_FILESHARE_ROOT: join(root, 'shares'),
      },
    };
  },
  isHealthy: (record) => acceptsTcp(Number(record.env.XFER_TEST_FILESHARE_PORT)),
};

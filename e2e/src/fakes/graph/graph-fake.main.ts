#!/usr/bin/env node
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { GraphFake } from './graph-fake.js';

/**
 * Runs the Microsoft Graph FAKE as a process of its own (e2e/src/services/graph-fake.service.ts
 * starts it): `graph-fake.main.js --port N --data-dir DIR`, with the drive under DIR/drive,
 * staging under DIR/staging, the certificate DIR/cert.pem and key DIR/key.pem, and the app's
 * secrets from the environment (GRAPH_FAKE_TENANT, GRAPH_FAKE_CLIENT_ID, GRAPH_FAKE_CLIENT_SECRET,
 * GRAPH_FAKE_REFRESH_TOKEN) so that they never show in the process list.
 */
async function main(): Promise<void> {
  const { values } = parseArgs({ options: { port: { type: 'string' }, 'data-dir': { type: 'string' } } });
  const dataDir = values['data-dir'];
  if (!values.port || !dataDir) throw new Error('usage: graph-fake.main.js --port N --data-dir DIR');
  const env = process.env;
  const need = (name: string) => {
    const value = env[name];
    if (!value) throw new Error(`${name} is not set`);
    return value;
  };
  const fake = new GraphFake({
    app: { tenant: need('GRAPH_FAKE_TENANT'), clientId: need('GRAPH_FAKE_CLIENT_ID'), clientSecret: need('GRAPH_FAKE_CLIENT_SECRET'), initialRefreshToken: need('GRAPH_FAKE_REFRESH_TOKEN') },
    root: join(dataDir, 'drive'),
    stagingDir: join(dataDir, 'staging'),
    cert: await readFile(join(dataDir, 'cert.pem'), 'utf8'),
    key: await readFile(join(dataDir, 'key.pem'), 'utf8'),
  });
  const port = await fake.listen(Number(values.port));
  process.stdout.write(`Microsoft Graph FAKE listening on https://127.0.0.1:${port}\n`);
  const stop = () => void fake.close().then(() => process.exit(0));
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}

main().catch((err: unknown) => {
  process.stderr.write(`graph fake: ${(err as Error).stack ?? err}\n`);
  process.exit(1);
});

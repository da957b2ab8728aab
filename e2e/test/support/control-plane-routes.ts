import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApp, parseConfig } from '@xfer/control-plane';

/**
 * Routes the document lists that are no API call of the client or the CLI: the document itself,
 * and the agents' WebSocket (the agent's door).
 */
const NOT_CALLS = new Set(['GET /openapi.json', 'GET /agents/connect']);

/** The slice of the OpenAPI document read here. */
interface Document {
  paths: Record<string, Record<string, unknown>>;
}

/**
 * Every API call of the control plane as `METHOD /path` (`GET /transfers/:id`), sorted: what the
 * tests holding the client and the CLI to "every endpoint" compare against. Read from the OpenAPI
 * document of the real app, built from the package on the test database (MONGODB_URI, a database
 * of its own, dropped after), so a route added anywhere is seen without wiring; the control
 * plane's own test (control-plane/test/openapi.test.ts) holds the document to every route the app
 * registers.
 */
export async function controlPlaneRoutes(): Promise<string[]> {
  const uri = process.env.MONGODB_URI;
  if (!uri) throw new Error('MONGODB_URI is not set: run tests through jest (its global setup starts the database)');
  const dataDir = mkdtempSync(join(tmpdir(), 'xfer-routes-'));
  const config = parseConfig({
    MONGODB_URI: uri,
    XFER_DB_NAME: `xfer_routes_${randomBytes(6).toString('hex')}`,
    XFER_DATA_DIR: dataDir,
    XFER_MASTER_KEY: randomBytes(32).toString('base64'),
    XFER_LOG_LEVEL: 'silent',
  });
  const app = await buildApp(config, { logger: false });
  try {
    const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
    if (res.statusCode !== 200) throw new Error(`GET /api/v1/openapi.json: ${res.statusCode} ${res.body}`);
    const { paths } = res.json() as Document;
    return Object.entries(paths)
      .flatMap(([path, operations]) => Object.keys(operations).map((method) =>
        `${method.toUpperCase()} ${path.replace(/^\/api\/v1/, '').replace(/\{(\w+)\}/g, ':$1')}`))
      .filter((route) => !NOT_CALLS.has(route))
      .sort();
  } finally {
    await app.dbConnection.dropDatabase().catch(() => {});
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

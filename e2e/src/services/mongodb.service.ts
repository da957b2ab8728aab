import { startEmbeddedMongo } from '@xfer/control-plane';
import { acceptsTcp } from '@xfer/control-plane/process';
import type { ServiceDefinition } from './types.js';

/**
 * The MongoDB API, exactly as the control plane embeds it: `mongod` when on PATH, else FerretDB
 * (SQLite), built once into the cache. Tests use MONGODB_URI with their own database name.
 */
export const mongodb: ServiceDefinition = {
  name: 'mongodb',
  summary: 'MongoDB API (mongod if on PATH, else FerretDB 1.24 on SQLite)',
  provides: ['MONGODB_URI'],
  async install(ctx) {
    // Starting once in a scratch dir builds FerretDB if needed and proves the server runs here.
    const db = await startEmbeddedMongo({ dataDir: ctx.dataDir, cacheDir: ctx.cacheDir, log: ctx.log, env: ctx.env });
    ctx.log(`mongodb: ${db.kind} runs`);
    await db.stop();
  },
  async start(ctx) {
    const db = await startEmbeddedMongo({ dataDir: ctx.dataDir, cacheDir: ctx.cacheDir, log: ctx.log, env: ctx.env, detached: true });
    return { pid: db.pid, env: { MONGODB_URI: db.uri } };
  },
  isHealthy: (record) => acceptsTcp(Number(new URL(record.env.MONGODB_URI).port)),
};

#!/usr/bin/env node
// API throughput: requests/s and latency of the real `xfer-server` binary on the test database
// (FerretDB with SQLite unless `mongod` is on PATH), against two baselines measured in the same run:
// bare Fastify answering the same route shape with the same body (what HTTP + JSON cost on this
// machine), and `findOne` by _id through the raw MongoDB driver (what one indexed read costs).
//
//   npm run build && node bench/api-throughput.mjs [--connections 20] [--duration 10] [--mongodb-uri mongodb://…] [--cpu-prof DIR] [--log-level info] [--own-db]
//
// --cpu-prof DIR writes the server's V8 CPU profile into DIR when it stops (bench/cpu-prof.cjs;
// open it in Chrome's DevTools or speedscope).
//
// The server runs with XFER_RATE_LIMIT_PER_MINUTE=1000000 (the highest allowed): this measures
// throughput, not the limiter's 429s; every run reports its status codes so a 429 would show.
// The server logs at --log-level (default warn, as e2e/src/stack.ts starts it; at info it writes
// one access-log line per request, which this process reads through a pipe). Figures, not assertions.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { homedir, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { MongoClient, ObjectId } from 'mongodb';
import { startEmbeddedMongo } from '@xfer/control-plane';
import { ensureServices, releaseServices } from '../e2e/dist/services/index.js';
import { startStack } from '../e2e/dist/stack.js';

const { values: args } = parseArgs({
  options: { connections: { type: 'string', default: '20' }, duration: { type: 'string', default: '10' }, 'mongodb-uri': { type: 'string' }, 'cpu-prof': { type: 'string' }, 'log-level': { type: 'string', default: 'warn' }, 'own-db': { type: 'boolean', default: false } },
});
const CONNECTIONS = Number(args.connections);
const DURATION = Number(args.duration);
const SERVICES = args['mongodb-uri'] || args['own-db'] ? [] : ['mongodb'];
const log = (msg) => process.stderr.write(`bench: ${msg}\n`);

/** One autocannon run after a short warm-up: req/s, p50, p99 and the status codes seen. */
async function cannon(url, headers = {}, setupRequest = undefined) {
  const requests = setupRequest ? [{ setupRequest }] : undefined;
  await autocannon({ url, connections: CONNECTIONS, duration: 2, headers, requests });
  const r = await autocannon({ url, connections: CONNECTIONS, duration: DURATION, headers, requests });
  const statuses = Object.entries(r.statusCodeStats ?? {}).map(([code, { count }]) => `${code}×${count}`).join(' ');
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, statuses: statuses + (r.errors ? ` errors×${r.errors}` : '') };
}

/** Bare Fastify in a process of its own, answering GET /api/v1/transfers/:id with `body`. */
async function bareFastify(body) {
  const code = `
    import Fastify from 'fastify';
    const body = JSON.parse(process.env.BODY);
    const app = Fastify();
    app.get('/api/v1/transfers/:id', async () => body);
    await app.listen({ host: '127.0.0.1', port: 0 });
    console.log('listening ' + app.server.address().port);`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', code], { env: { ...process.env, BODY: JSON.stringify(body) }, stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = await once(child.stdout, 'data');
  return { port: Number(/listening (\d+)/.exec(String(line))[1]), stop: () => { child.kill(); return once(child, 'exit'); } };
}

/** `findOne` by _id from CONNECTIONS concurrent loops for DURATION seconds. */
async function findOneRate(collection, ids) {
  const latencies = [];
  const deadline = performance.now() + DURATION * 1000;
  let n = 0;
  await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    while (performance.now() < deadline) {
      const s = performance.now();
      await collection.findOne({ _id: ids[n++ % ids.length] });
      latencies.push(performance.now() - s);
    }
  }));
  latencies.sort((x, y) => x - y);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  return { rps: latencies.length / DURATION, p50: at(0.5), p99: at(0.99), statuses: 'n/a' };
}

const { env } = await ensureServices(SERVICES, { env: process.env, log });
// --own-db: a database server of this run's own, started as xfer-server embeds it, so that other
// work on the shared test database (other test runs) does not weigh on the figures.
const ownDir = args['own-db'] ? mkdtempSync(join(tmpdir(), 'xfer-bench-db-')) : null;
const ownDb = ownDir ? await startEmbeddedMongo({ dataDir: ownDir, cacheDir: join(process.env.HOME ?? homedir(), '.cache/xfer'), log }) : null;
const e = { ...process.env, ...env, ...(args['mongodb-uri'] ? { MONGODB_URI: args['mongodb-uri'] } : {}), ...(ownDb ? { MONGODB_URI: ownDb.uri } : {}) };
const stack = await startStack({ env: e, serverEnv: {
  XFER_SCANNER: 'none', XFER_RATE_LIMIT_PER_MINUTE: '1000000', XFER_LOG_LEVEL: args['log-level'],
  ...(args['cpu-prof'] ? { NODE_OPTIONS: `--require ${new URL('./cpu-prof.cjs', import.meta.url).pathname}`, XFER_BENCH_CPU_PROF_DIR: args['cpu-prof'] } : {}),
} });
const client = await MongoClient.connect(e.MONGODB_URI);
const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');
const loadBefore = load();
try {
  const conn = (type, host) => stack.api.data('POST', '/connections', { name: `bench-${type}-${new ObjectId()}`, type, host, credentials: { username: 'u', password: 'p' } });
  const [src, dst] = [await conn('sftp', 'src.example.test'), await conn('sftp', 'dst.example.test')];
  let transfer;
  for (let i = 0; i < 50; i++) {
    transfer = await stack.api.data('POST', '/transfers', { name: `bench-${i}`, sourceConnectionId: src.id, sourcePath: '/in', destinationConnectionId: dst.id, destinationPath: '/out' });
  }
  const body = await stack.api.call('GET', `/transfers/${transfer.id}`);
  const transfers = client.db(stack.serverEnv.XFER_DB_NAME).collection('transfers');
  const ids = (await transfers.find({}, { projection: { _id: 1 } }).toArray()).map((t) => t._id);

  log('bare Fastify');
  const bare = await bareFastify(body.body);
  const baseline = await cannon(`http://127.0.0.1:${bare.port}/api/v1/transfers/${transfer.id}`);
  await bare.stop();
  log('findOne');
  const findOne = await findOneRate(transfers, ids);

  const key = { authorization: `Bearer ${stack.api.token}` };
  const runs = [
    ['authenticated GET /transfers/:id', `/transfers/${transfer.id}`, key],
    ['authenticated GET /transfers?limit=50', '/transfers?limit=50', key],
    ['401 (unknown key, repeated) GET /transfers/:id', `/transfers/${transfer.id}`, { authorization: `Bearer svc_${'x'.repeat(43)}` }],
    ['401 (no credentials) GET /transfers/:id', `/transfers/${transfer.id}`, {}],
    // Each request a key never seen: one read each (only refusals of known-dead keys are remembered).
    ['401 (a new random key each request) GET /transfers/:id', `/transfers/${transfer.id}`, {},
      (req) => ({ ...req, headers: { ...req.headers, authorization: `Bearer svc_${randomBytes(32).toString('base64url')}` } })],
    ['GET /health', '/health', {}],
  ];
  const results = [];
  for (const [label, path, headers, setup] of runs) {
    log(label);
    results.push([label, await cannon(`${stack.url}${path}`, headers, setup)]);
  }

  const ms = (v) => `${v.toFixed(1)} ms`;
  console.log(`${CONNECTIONS} connections, ${DURATION} s per run, server log level ${args['log-level']}; database ${ownDb ? `${ownDb.kind} of this run's own` : e.MONGODB_URI.replace(/\/\/[^@]*@/, '//')}; load average (1/5/15 min) before ${loadBefore}, after ${load()}`);
  console.log('| run | req/s | p50 | p99 | / bare Fastify | / findOne | statuses |');
  console.log('|---|---|---|---|---|---|---|');
  const row = (label, r) => console.log(`| ${label} | ${r.rps.toFixed(0)} | ${ms(r.p50)} | ${ms(r.p99)} | ${(r.rps / baseline.rps).toFixed(3)} | ${(r.rps / findOne.rps).toFixed(2)} | ${r.statuses} |`);
  row('baseline: bare Fastify, same route and body', baseline);
  row('baseline: findOne by _id (raw driver)', findOne);
  for (const [label, r] of results) row(`xfer: ${label}`, r);
} finally {
  await client.close();
  await stack.stop();
  await releaseServices(SERVICES, { env: process.env, log });
  await ownDb?.stop();
  if (ownDir) rmSync(ownDir, { recursive: true, force: true });
}

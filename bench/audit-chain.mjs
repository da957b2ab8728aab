#!/usr/bin/env node
// The cost of the tamper-evident audit chain (docs/security.md "The audit chain"): records written
// per second through one instance's ChainWriter (one insert per record, its writes to a chain in
// order), through three writers on one chain (three instances contending for numbers), and
// `verifyChain` records/s, against a baseline measured in the same run: plain insertOne of the same
// record shape with no chain, at the same concurrency.
//
//   npm run build && node bench/audit-chain.mjs [--records 2000] [--concurrency 20] [--mongodb-uri mongodb://…]
//
// Without --mongodb-uri it uses the test database service (FerretDB with SQLite unless `mongod` is
// on PATH). Figures, not assertions.
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import mongoose from 'mongoose';
import { ensureServices, releaseServices } from '../e2e/dist/services/index.js';
import { ChainWriter, verifyChain } from '../control-plane/dist/lib/audit-chain.js';
import { createIndexes, registerModels } from '../control-plane/dist/models/index.js';

const { values: args } = parseArgs({ options: { records: { type: 'string', default: '2000' }, concurrency: { type: 'string', default: '20' }, 'mongodb-uri': { type: 'string' } } });
const N = Number(args.records);
const C = Number(args.concurrency);
const SERVICES = args['mongodb-uri'] ? [] : ['mongodb'];
const log = (msg) => process.stderr.write(`bench: ${msg}\n`);

const { env } = await ensureServices(SERVICES, { env: process.env, log });
const uri = args['mongodb-uri'] ?? env.MONGODB_URI ?? process.env.MONGODB_URI;
const conn = mongoose.createConnection(uri, { dbName: `xfer_bench_audit_${randomBytes(4).toString('hex')}`, autoIndex: false });
await conn.asPromise();
const models = registerModels(conn);
await createIndexes(models);
const events = models.auditEvents.collection;
const key = randomBytes(32);

const record = (accountId, i) => ({
  timestamp: new Date(), account_id: accountId, actor: { type: 'user', id: 'bench' }, action: 'bench.write',
  resource: { type: 'thing', id: String(i) }, ip: '127.0.0.1', outcome: 'success', details: { i, name: `thing-${i}` },
});

/** `N` calls of `write(i)`, `C` at a time: records/s. */
async function rate(write) {
  let next = 0;
  const t = performance.now();
  await Promise.all(Array.from({ length: C }, async () => {
    while (next < N) await write(next++);
  }));
  return N / ((performance.now() - t) / 1000);
}

try {
  const plain = conn.collection('bench_plain');
  const baseline = await rate((i) => plain.insertOne(record(new mongoose.Types.ObjectId(), i)));
  const oneChain = new mongoose.Types.ObjectId();
  const writer = new ChainWriter(events, key);
  const single = await rate((i) => writer.append(record(oneChain, i)));
  const manyWriter = new ChainWriter(events, key);
  const accounts = Array.from({ length: 100 }, () => new mongoose.Types.ObjectId());
  const spread = await rate((i) => manyWriter.append(record(accounts[i % 100], i)));
  const contended = new mongoose.Types.ObjectId();
  const instances = [new ChainWriter(events, key), new ChainWriter(events, key), new ChainWriter(events, key)];
  const three = await rate((i) => instances[i % 3].append(record(contended, i)));
  let t = performance.now();
  const report = await verifyChain(events, key, String(oneChain));
  const verifyRate = report.records / ((performance.now() - t) / 1000);
  if (report.broken || report.records !== N) throw new Error(`chain did not verify: ${JSON.stringify(report)}`);
  const contendedReport = await verifyChain(events, key, String(contended));
  if (contendedReport.broken || contendedReport.records !== N) throw new Error(`contended chain did not verify: ${JSON.stringify(contendedReport)}`);

  console.log(`audit chain, ${N} records per row, ${C} concurrent callers`);
  console.log('| write path | records/s | ratio to plain insert |');
  console.log('|---|---|---|');
  const row = (label, r) => console.log(`| ${label} | ${r.toFixed(0)} | ${(r / baseline).toFixed(2)} |`);
  row('plain insertOne, no chain (baseline)', baseline);
  row('ChainWriter, one chain (one account)', single);
  row('ChainWriter, 100 chains', spread);
  row('3 writers (instances), one chain', three);
  console.log(`verifyChain: ${verifyRate.toFixed(0)} records/s`);
} finally {
  await conn.dropDatabase().catch(() => {});
  await conn.close();
  await releaseServices(SERVICES, { env: process.env, log });
}

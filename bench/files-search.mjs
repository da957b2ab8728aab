#!/usr/bin/env node
// File list and search at scale: N file records of one account (default 1,000,000) and the time of
// each list/search call through the real `xfer-server` binary, against a baseline measured in the
// same run: one full pass over the account's records (what a query costs when no index serves it).
//
//   npm run build && node bench/files-search.mjs [--records 1000000] [--mongodb-uri mongodb://…]
//
// Without --mongodb-uri it uses the test database service (FerretDB with SQLite unless `mongod` is
// on PATH). The records are inserted straight into the database (uploading a million files is not
// what is measured), shaped as the upload route writes them. Figures, not assertions.
import { parseArgs } from 'node:util';
import { MongoClient, ObjectId } from 'mongodb';
import { ensureServices, releaseServices } from '../e2e/dist/services/index.js';
import { startStack } from '../e2e/dist/stack.js';

const { values: args } = parseArgs({ options: { records: { type: 'string', default: '1000000' }, 'mongodb-uri': { type: 'string' } } });
const N = Number(args.records);
const SERVICES = args['mongodb-uri'] ? [] : ['mongodb'];
const log = (msg) => process.stderr.write(`bench: ${msg}\n`);

const { env } = await ensureServices(SERVICES, { env: process.env, log });
const e = { ...process.env, ...env, ...(args['mongodb-uri'] ? { MONGODB_URI: args['mongodb-uri'] } : {}) };
const stack = await startStack({ env: e, serverEnv: { XFER_SCANNER: 'none' } });
const client = await MongoClient.connect(e.MONGODB_URI);
try {
  const db = client.db(stack.serverEnv.XFER_DB_NAME);
  const account = await db.collection('accounts').findOne({});
  const files = db.collection('files');
  const WORDS = ['report', 'invoice', 'photo', 'backup', 'contract', 'design', 'draft', 'final', 'budget', 'scan', 'notes', 'summary', 'data', 'export', 'archive', 'image', 'video', 'audio', 'slides', 'plan'];
  const TYPES = [['pdf', 'application/pdf'], ['jpg', 'image/jpeg'], ['png', 'image/png'], ['txt', 'text/plain'], ['csv', 'text/csv'], ['zip', 'application/zip'], ['mp4', 'video/mp4'], ['json', 'application/json']];
  log(`inserting ${N} file records`);
  let t = performance.now();
  const start = Date.now() - N * 1000;
  for (let i = 0; i < N; i += 10_000) {
    const batch = [];
    for (let j = i; j < Math.min(N, i + 10_000); j++) {
      const [ext, mime] = TYPES[j % TYPES.length];
      const name = `${WORDS[j % 20]}-${WORDS[(j * 7) % 20]}-${j}.${ext}`;
      batch.push({
        _id: ObjectId.createFromTime(Math.floor((start + j * 1000) / 1000)),
        account_id: account._id, name, name_lower: name.toLowerCase(), path: `/team/f${j % 1000}`,
        size: (j * 7919) % 100_000_000, mime_type: mime, sha256: '0'.repeat(64), storage_key: `bench/${j}`,
        uploaded_by: { type: 'system', id: null }, created_at: new Date(start + j * 1000), deleted_at: null, deleted_by: null,
      });
    }
    await files.insertMany(batch, { ordered: false });
  }
  log(`inserted in ${((performance.now() - t) / 1000).toFixed(0)} s`);

  t = performance.now();
  const total = await files.countDocuments({ account_id: account._id, deleted_at: null });
  const fullPassMs = performance.now() - t;

  const CALLS = [
    ['list one folder (1 of 1,000)', '/files?path=/team/f7'],
    ['search q, common word', '/files/search?q=invoice'],
    ['search q, one match', `/files/search?q=-${Math.floor(N / 2)}.`],
    ['search q, no match', '/files/search?q=zzzz'],
    ['search type exact', '/files/search?type=image/png'],
    ['search type prefix', '/files/search?type=image/*'],
    ['search size range', '/files/search?min_size=1000&max_size=200000'],
    ['search q + type + size', '/files/search?q=photo&type=image/*&min_size=1000000'],
  ];
  console.log(`${total} live records of one account; baseline: one full pass (count) ${fullPassMs.toFixed(0)} ms`);
  console.log('| call | results | time | time / full pass |');
  console.log('|---|---|---|---|');
  for (const [label, path] of CALLS) {
    const s = performance.now();
    const res = await stack.api.call('GET', `${path}${path.includes('?') ? '&' : '?'}limit=50`);
    const ms = performance.now() - s;
    // A page the database cannot serve within its time limit (lib/pagination.ts) answers 503.
    const results = res.status === 200 ? res.body.data.length : `${res.status}: ${res.body.error}`;
    console.log(`| ${label} | ${results} | ${ms.toFixed(0)} ms | ${(ms / fullPassMs).toFixed(2)} |`);
  }
} finally {
  await client.close();
  await stack.stop();
  await releaseServices(SERVICES, { env: process.env, log });
}

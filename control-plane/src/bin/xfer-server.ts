#!/usr/bin/env node
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import mongoose from 'mongoose';
import { PLANS, type Plan } from '@xfer/shared';
import { readFile, mkdir, writeFile } from 'node:fs/promises';
import { parseConfig, ConfigError, type Config } from '../config.js';
import { buildApp, type App } from '../app.js';
import { bootstrapAccount } from '../plugins/app/access/bootstrap.js';
import { createIndexes, registerModels, type Models } from '../models/index.js';
import { keyFiles, vaultOf } from '../lib/vault.js';
import { dropRetiredKeys, generateMasterKeyFile, resealAll, type DropReport } from '../lib/key-rotation.js';
import { chainsToVerify, SYSTEM_CHAIN, verifyChain } from '../lib/audit-chain.js';
import { replaceSessionKey, systemKeyOf } from '../lib/system-keys.js';
import { startEmbeddedMongo } from '../db/index.js';
import { AppError } from '../errors.js';

const HELP: Record<string, string> = {
  main: `xfer-server — the xfer control plane

Usage:
  xfer-server start [--local]          Serve the REST API (see docs/configuration.md)
  xfer-server bootstrap --email E --password P --plan free|team|enterprise [--account-name N] [--json]
                                       Create an account, its owner and an all-scopes API key
  xfer-server rotate-keys [--new-key] [--drop-retired] [--session]
                                       Re-seal every secret under the active master key
  xfer-server audit verify [--account ID] [--json]
                                       Check the audit chain(s); non-zero naming the first broken record
  xfer-server <command> --help         Help for one command

Without MONGODB_URI, the embedded database (mongod on PATH, else FerretDB) runs under XFER_DATA_DIR/db.`,
  start: `xfer-server start [--local]

Serves the API on XFER_HOST:XFER_PORT (default 127.0.0.1:8080). Configuration comes from the
environment only; see docs/configuration.md.

  --local   Developer stack: on first start, create an admin account (enterprise plan) and print
            its email, password and API key once; keep a token for a local agent in
            XFER_DATA_DIR/local-agent.token (npm start runs xfer-agent with it).`,
  bootstrap: `xfer-server bootstrap --email E --password P --plan free|team|enterprise [--account-name N] [--json]

Creates an account with an owner user (the given email and password, 12+ characters) and an API
key holding every scope, and prints {"account_id","user_id","api_key"}. The key is shown once.
Exit codes: 0 created, 2 bad arguments, 5 the email exists already, 1 anything else.`,
  'rotate-keys': `xfer-server rotate-keys [--new-key] [--drop-retired] [--session]

Seals every secret (connection credentials, webhook secrets, MFA secrets) again under the active
master key, bound to its account and record; values sealed under a retired key or before binding
are the ones rewritten. Safe while other instances run; idempotent: run it again after a crash,
or until it reports nothing left. Prints counts as JSON. See docs/security.md "Key rotation".

With XFER_MASTER_KEY: set the new key there and the old one in XFER_RETIRED_MASTER_KEYS first.
Without it (key files in XFER_DATA_DIR):
  --new-key        first make a new master.key, the current one moved to retired-master.keys
  --drop-retired   after a pass that leaves nothing under a retired key, delete retired-master.keys;
                   refused (exit 6, naming them) while a live instance still seals under a retired
                   key: instances take a new master.key up within seconds
  --session        also replace the session-signing key kept in the database (not XFER_SESSION_KEY):
                   every console session ends once the instances restart
Exit codes: 0 everything under the active key, 3 values left (changed meanwhile: run again;
unreadable: see unreadable_values), 6 retired keys kept for live instances still using them (run
again), 2 bad arguments, 1 anything else.`,
  audit: `xfer-server audit verify [--account ID] [--json]

Walks the audit chain of one account (--account; "system" for records without an account), or of
every account, and checks each record's number, link to the one before and hash. Prints each
chain's head (number and hash: keep them elsewhere to detect a later truncation).
Exit codes: 0 every chain intact, 4 a chain is broken (the first broken record is named), 2 bad
arguments, 1 anything else.`,
};

const log = (msg: string) => process.stderr.write(`xfer-server: ${msg}\n`);

/** The configured database, or the embedded one started for this process. */
async function database(config: Config) {
  if (config.mongodbUri) return { uri: config.mongodbUri, stop: async () => {} };
  const embedded = await startEmbeddedMongo({ dataDir: join(config.dataDir, 'db'), cacheDir: config.cacheDir, log });
  log(`embedded ${embedded.kind} database at ${join(config.dataDir, 'db')}`);
  return embedded;
}

async function start(config: Config, local: boolean): Promise<void> {
  const db = await database(config);
  const app = await buildApp({ ...config, mongodbUri: db.uri });
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    app.log.info({ signal }, 'shutting down');
    await app.close();
    await db.stop();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));

  let admin: { email: string; password: string; api_key: string } | null = null;
  if (local && (await app.db.accounts.estimatedDocumentCount()) === 0) {
    const email = 'admin@localhost.localdomain';
    const password = randomBytes(12).toString('base64url');
    const result = await bootstrapAccount(app.db, app.vault, { email, password, plan: 'enterprise', accountName: 'Local admin' });
    admin = { email, password, api_key: result.api_key };
  }
  const agentTokenFile = local ? await ensureLocalAgentToken(app, config.dataDir) : null;
  const address = await app.listen({ host: config.host, port: config.port });
  const url = `${address}/api/v1`;
  // One write, so a reader of the pipe sees the URL and the first-start block together.
  let banner = `\nxfer control plane listening on ${url}\n`;
  if (admin) {
    banner +=
      `\nFirst start: an admin account was created. These are shown only now:\n` +
      `  email:    ${admin.email}\n  password: ${admin.password}\n  API key:  ${admin.api_key}\n\n` +
      `Try: curl -H "Authorization: Bearer ${admin.api_key}" ${url}/connections\n\n`;
  } else if (local) {
    banner += `Data reused from ${config.dataDir} (the admin key was shown on first start).\n\n`;
  }
  if (agentTokenFile) banner += `Local agent token: ${agentTokenFile} (npm start runs xfer-agent with it)\n\n`;
  process.stdout.write(banner);
}

/**
 * The developer stack's own agent: a token for an agent of the local admin account, kept 0600 in
 * the data dir so the next start reuses it. A token whose agent was revoked (revoking deletes the
 * agent) is replaced by a new agent.
 */
async function ensureLocalAgentToken(app: App, dataDir: string): Promise<string> {
  const file = join(dataDir, 'local-agent.token');
  const existing = await readFile(file, 'utf8').then((t) => t.trim(), () => null);
  if (existing && (await app.agents.byToken(existing))) return file;
  const account = await app.db.accounts.findOne({}, { _id: 1 }).sort({ _id: 1 }).lean();
  if (!account) throw new Error('no account to register the local agent in');
  const taken = await app.db.agents.exists({ account_id: account._id, name: 'local' });
  const name = taken ? `local-${randomBytes(3).toString('hex')}` : 'local';
  // The operator of the server made it: approved (docs/security.md "Agents: approval").
  const { token } = await app.agents.create(account._id, { name, labels: ['local'] }, { type: 'system', id: null }, true);
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, `${token}\n`, { mode: 0o600 });
  return file;
}

/** Runs `fn` with the models of the configured (or embedded) database, indexes in place. */
async function withModels<T>(config: Config, fn: (models: Models) => Promise<T>): Promise<T> {
  const db = await database(config);
  const conn = mongoose.createConnection(db.uri, { dbName: config.databaseName, autoIndex: false, serverSelectionTimeoutMS: 10_000 });
  try {
    await conn.asPromise();
    const models = registerModels(conn);
    await createIndexes(models);
    return await fn(models);
  } finally {
    await conn.close();
    await db.stop();
  }
}

async function rotateKeys(config: Config, args: string[]): Promise<number> {
  const { values } = parseArgs({
    args, options: { 'new-key': { type: 'boolean', default: false }, 'drop-retired': { type: 'boolean', default: false }, session: { type: 'boolean', default: false } },
  });
  if (values.session && config.sessionKey) throw new UsageError('--session replaces the key kept in the database: XFER_SESSION_KEY is set, replace it there instead');
  const fileMode = config.masterKeys === null;
  if (!fileMode && (values['new-key'] || values['drop-retired'])) {
    throw new UsageError('--new-key and --drop-retired manage the key files of XFER_DATA_DIR: with XFER_MASTER_KEY, set the keys in the environment (docs/security.md "Key rotation")');
  }
  if (values['new-key']) {
    const ids = generateMasterKeyFile(config.dataDir);
    log(`new master key ${ids.active} in ${keyFiles(config.dataDir).active}; ${ids.retired} retired to ${keyFiles(config.dataDir).retired}`);
  }
  const vault = vaultOf(config);
  const { report, drop } = await withModels(config, async (models) => {
    if (values.session) {
      await replaceSessionKey(models, vault);
      log('session key replaced: restart every instance; every console session ends');
    }
    const report = await resealAll(models, vault);
    let drop: DropReport | null = null;
    if (values['drop-retired']) {
      if (report.changed_meanwhile + report.unreadable > 0) log('retired keys kept: values are left to re-seal (see the counts)');
      else drop = await dropRetiredKeys(models, config.dataDir, log);
    }
    return { report, drop };
  });
  const left = report.changed_meanwhile + report.unreadable;
  if (drop && drop.instances_on_retired.length > 0) {
    log(`retired keys kept: live instances still seal under a retired key (${drop.instances_on_retired.map((i) => `${i.id} on ${i.active_kid}`).join(', ')}); `
      + 'they take the new master.key up within seconds (a restart does at once): run this again');
  } else if (drop && drop.values_on_retired > 0) {
    log(`retired keys kept: ${drop.values_on_retired} values were sealed under a retired key meanwhile: run this again`);
  }
  // With --drop-retired: whether the file went, and what kept it (absent when the pass left values).
  process.stdout.write(JSON.stringify({ ...report, ...(values['drop-retired'] ? { retired_keys_dropped: false, ...drop } : {}) }) + '\n');
  if (left > 0 || (drop && drop.values_on_retired > 0)) return 3;
  return drop && drop.instances_on_retired.length > 0 ? 6 : 0;
}

async function audit(config: Config, args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { account: { type: 'string' }, json: { type: 'boolean', default: false } } });
  if (positionals.length !== 1 || positionals[0] !== 'verify') throw new UsageError('usage: xfer-server audit verify [--account ID] [--json]');
  const account = values.account;
  if (account !== undefined && account !== SYSTEM_CHAIN && !/^[0-9a-f]{24}$/.test(account)) throw new UsageError('--account must be an account id (24 hex characters) or "system"');
  const reports = await withModels(config, async (models) => {
    const collection = models.auditEvents.collection;
    const key = await systemKeyOf(models, vaultOf(config), 'audit');
    const out = [];
    for (const chain of await chainsToVerify(collection, account)) out.push(await verifyChain(collection, key, chain));
    return out;
  });
  const broken = reports.find((r) => r.broken);
  if (values.json) process.stdout.write(JSON.stringify({ ok: !broken, chains: reports }) + '\n');
  else {
    for (const r of reports) {
      process.stdout.write(`${r.chain}: ${r.broken ? `BROKEN at record ${r.broken.seq}: ${r.broken.problem}` : `ok, ${r.records} records`}${r.head ? `, head ${r.head.seq} ${r.head.hash}` : ''}\n`);
    }
  }
  if (broken) log(`audit chain ${broken.chain} is broken at record ${broken.broken!.seq}${broken.broken!.id ? ` (${broken.broken!.id})` : ''}: ${broken.broken!.problem}`);
  return broken ? 4 : 0;
}

async function bootstrap(config: Config, args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      email: { type: 'string' }, password: { type: 'string' }, plan: { type: 'string' },
      'account-name': { type: 'string' }, json: { type: 'boolean', default: false },
    },
  });
  if (!values.email || !values.password || !values.plan) throw new UsageError('bootstrap needs --email, --password and --plan');
  if (!(PLANS as readonly string[]).includes(values.plan)) throw new UsageError(`--plan must be one of ${PLANS.join(', ')}`);
  const result = await withModels(config, (models) => bootstrapAccount(models, vaultOf(config), {
    email: values.email!, password: values.password!, plan: values.plan as Plan, accountName: values['account-name'],
  }));
  if (values.json) process.stdout.write(JSON.stringify(result) + '\n');
  else process.stdout.write(`account_id: ${result.account_id}\nuser_id:    ${result.user_id}\napi_key:    ${result.api_key}\n(the API key is shown only now)\n`);
}

class UsageError extends Error {}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (!command || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(HELP.main + '\n');
    return;
  }
  if (!(command in HELP) || command === 'main') throw new UsageError(`unknown command "${command}" (try --help)`);
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(HELP[command] + '\n');
    return;
  }
  const config = parseConfig(process.env);
  if (command === 'start') {
    const { values } = parseArgs({ args: rest, options: { local: { type: 'boolean', default: false } } });
    await start(config, values.local ?? false);
  } else if (command === 'rotate-keys') {
    process.exitCode = await rotateKeys(config, rest);
  } else if (command === 'audit') {
    process.exitCode = await audit(config, rest);
  } else {
    await bootstrap(config, rest);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  const message = err instanceof Error ? err.message : String(err);
  const usage = err instanceof UsageError || err instanceof ConfigError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
  log(message);
  process.exit(usage ? 2 : err instanceof AppError && err.statusCode === 409 ? 5 : 1);
});

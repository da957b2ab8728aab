import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { boundTo } from '../src/lib/sealed-fields.js';
import { keyId, Vault, type Sealed } from '../src/lib/vault.js';
import { openWebhookSecret } from '../src/plugins/app/webhooks/webhooks.service.js';
import { auth, buildTestApp, createAccount, login, type TestAccount } from './helper.js';
import { makeConnection, SECRET, sealFormat1 } from './fixtures.js';

/**
 * `xfer-server rotate-keys`, run as an operator runs it against the database of running
 * instances: every sealed value ends up under the new key, bound; a second run finds nothing to
 * do; instances holding both keys read everything meanwhile; sessions survive (their key is not
 * the master key).
 */
const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../dist/bin/xfer-server.js');
const K1 = randomBytes(32);
const K2 = randomBytes(32);
const SESSION = randomBytes(32);
let a: App;
let owner: TestAccount;

beforeAll(async () => {
  a = await buildTestApp({ masterKeys: [K1], sessionKey: SESSION });
  owner = await createAccount(a);
});
afterAll(() => a.close());

function rotate(env: Record<string, string>, args: string[] = []) {
  const run = spawnSync(process.execPath, [BIN, 'rotate-keys', ...args], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, MONGODB_URI: process.env.MONGODB_URI, XFER_DB_NAME: a.config.databaseName, XFER_DATA_DIR: a.config.dataDir, ...env },
    encoding: 'utf8', timeout: 60_000,
  });
  let report: Record<string, unknown> | null = null;
  try { report = JSON.parse(run.stdout); } catch { /* shown below */ }
  if (!report) throw new Error(`rotate-keys ${run.status}: ${run.stdout}\n${run.stderr}`);
  return { code: run.status, report: report as Record<string, number> & { unreadable_values: string[]; active_kid: string } };
}

async function fixtures() {
  const conn = await makeConnection(a, owner.apiKey, 'sftp');
  const hook = await a.inject({ method: 'POST', url: '/api/v1/webhooks', headers: auth(owner.apiKey), payload: { url: 'https://8.8.8.8/hook', events: ['transfer.completed'] } });
  expect(hook.statusCode).toBe(201);
  const legacy = await makeConnection(a, owner.apiKey, 'sftp');
  await a.db.connections.collection.updateOne({ _id: new Types.ObjectId(legacy.id) }, { $set: { credentials: sealFormat1(K1, { username: 'u', password: SECRET }) } });
  const user = { _id: new Types.ObjectId(owner.userId), account_id: owner.accountId };
  await a.db.users.updateOne({ _id: user._id }, { $set: { mfa_secret: a.vault.seal('JBSWY3DPEHPK3PXP', boundTo('user.mfa', user)) } });
  const param = await a.inject({
    method: 'POST', url: '/api/v1/parameters', headers: auth(owner.apiKey), payload: { name: `rot_${randomBytes(4).toString('hex')}`, value: SECRET, secret: true },
  });
  expect(param.statusCode).toBe(201);
  return { conn: conn.id, legacy: legacy.id, hook: hook.json().data.id as string, hookSecret: hook.json().data.secret as string, user, param: param.json().data.id as string };
}

async function expectAllOpen(app: App, f: Awaited<ReturnType<typeof fixtures>>) {
  for (const id of [f.conn, f.legacy]) expect((await app.connections.loadSettings(owner.accountId, id)).credentials).toMatchObject({ password: SECRET });
  expect(openWebhookSecret(app.vault, (await app.db.webhooks.findById(f.hook).lean())!)).toBe(f.hookSecret);
  const user = await app.db.users.findById(f.user._id).lean();
  expect(app.vault.open(user!.mfa_secret as Sealed, boundTo('user.mfa', user!))).toBe('JBSWY3DPEHPK3PXP');
  const param = await app.db.parameters.findById(f.param).lean();
  expect(app.vault.open(param!.secret_value as Sealed, boundTo('parameter.value', param!))).toBe(SECRET);
}

test('env keys: re-seals everything under the new key, idempotent, readable by instances with both keys; sessions survive', async () => {
  const session = await login(a, owner.email, owner.password);
  const f = await fixtures();
  // Step 1 of the flow: instances run with the new key active and the old one retired.
  const b = await buildTestApp({ masterKeys: [K2, K1], sessionKey: SESSION, databaseName: a.config.databaseName });
  try {
    await expectAllOpen(b, f);
    const env = { XFER_MASTER_KEY: K2.toString('base64'), XFER_RETIRED_MASTER_KEYS: K1.toString('base64') };
    const first = rotate(env);
    expect(first.code).toBe(0);
    expect(first.report).toMatchObject({ active_kid: keyId(K2), changed_meanwhile: 0, unreadable: 0 });
    expect(first.report.resealed).toBeGreaterThanOrEqual(3);
    expect((first.report as unknown as { by_field: Record<string, { resealed: number }> }).by_field['parameters.secret_value']).toMatchObject({ resealed: 1 });
    const second = rotate(env);
    expect(second.report).toMatchObject({ resealed: 0, unreadable: 0, current: first.report.scanned });
    // Meanwhile and afterwards, the instance holding both keys reads everything.
    await expectAllOpen(b, f);
    for (const id of [f.conn, f.legacy]) expect((await b.db.connections.findById(id).lean())!.credentials).toMatchObject({ v: 2, kid: keyId(K2) });
    // Step 3: the old key is gone; everything still opens.
    const c = await buildTestApp({ masterKeys: [K2], sessionKey: SESSION, databaseName: a.config.databaseName });
    try {
      await expectAllOpen(c, f);
      const me = await c.inject({ method: 'GET', url: '/api/v1/connections', headers: auth(session) });
      expect(me.statusCode).toBe(200);
    } finally {
      await c.close();
    }
  } finally {
    await b.close();
  }
}, 120_000);

test('a value under a key nobody has is counted unreadable and named; exit 3', async () => {
  const conn = await makeConnection(a, owner.apiKey, 'sftp');
  const lost = new Vault([randomBytes(32)]).seal({ username: 'u', password: 'p' }, boundTo('connection.credentials', { _id: conn.id, account_id: owner.accountId }));
  await a.db.connections.collection.updateOne({ _id: new Types.ObjectId(conn.id) }, { $set: { credentials: lost } });
  const run = rotate({ XFER_MASTER_KEY: K2.toString('base64'), XFER_RETIRED_MASTER_KEYS: K1.toString('base64') });
  expect(run.code).toBe(3);
  expect(run.report.unreadable).toBe(1);
  expect(run.report.unreadable_values).toEqual([`connections/${conn.id}.credentials`]);
  await a.db.connections.collection.deleteOne({ _id: new Types.ObjectId(conn.id) });
}, 60_000);

test('key files: --new-key retires master.key, a running instance on the data dir picks the new key up; --drop-retired', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'xfer-rotate-'));
  const app = await buildTestApp({ masterKeys: null, sessionKey: null, dataDir });
  try {
    const acct = await createAccount(app);
    const conn = await makeConnection(app, acct.apiKey, 'sftp');
    const keyFile = join(dataDir, 'master.key');
    const before = readFileSync(keyFile, 'utf8');
    const env = { XFER_DATA_DIR: dataDir, XFER_DB_NAME: app.config.databaseName };
    const run = rotate(env, ['--new-key']);
    expect(run.code).toBe(0);
    expect(run.report.resealed).toBeGreaterThanOrEqual(1);
    expect(readFileSync(keyFile, 'utf8')).not.toBe(before);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(join(dataDir, 'retired-master.keys'), 'utf8')).toBe(before);
    // The running instance still seals under the key it started with, and opens the new one's values.
    expect((await app.connections.loadSettings(acct.accountId, conn.id)).credentials).toMatchObject({ password: SECRET });
    const dropped = rotate(env, ['--drop-retired']);
    expect(dropped.report).toMatchObject({ retired_keys_dropped: true, resealed: 0, unreadable: 0 });
    expect(existsSync(join(dataDir, 'retired-master.keys'))).toBe(false);
    // --new-key is for key files only.
    const refused = spawnSync(process.execPath, [BIN, 'rotate-keys', '--new-key'], {
      env: { PATH: process.env.PATH, MONGODB_URI: process.env.MONGODB_URI, XFER_MASTER_KEY: K2.toString('base64') }, encoding: 'utf8',
    });
    expect(refused.status).toBe(2);
    expect(refused.stderr).toMatch(/--new-key and --drop-retired manage the key files/);
  } finally {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 120_000);

test('without XFER_SESSION_KEY: one session key in the database for every instance; master rotation keeps it, --session replaces it', async () => {
  const first = await buildTestApp({ masterKeys: [K1], sessionKey: null });
  const acct = await createAccount(first);
  const env = { XFER_DB_NAME: first.config.databaseName, XFER_DATA_DIR: first.config.dataDir };
  let second: App | null = null;
  try {
    const session = await login(first, acct.email, acct.password);
    const me = (app: App, token: string) => app.inject({ method: 'GET', url: '/api/v1/settings/mfa', headers: auth(token) });
    // Another instance (its own data dir) accepts it; the key is sealed, bound, in the database.
    second = await buildTestApp({ masterKeys: [K2, K1], sessionKey: null, databaseName: first.config.databaseName });
    expect((await me(second, session)).statusCode).toBe(200);
    const stored = await first.db.systemKeys.findById('session').lean();
    expect(stored!.key).toMatchObject({ v: 2, kid: keyId(K1) });
    // Master key rotation re-seals the session key without changing it.
    const rotated = rotate({ ...env, XFER_MASTER_KEY: K2.toString('base64'), XFER_RETIRED_MASTER_KEYS: K1.toString('base64') });
    expect(rotated.code).toBe(0);
    expect((await first.db.systemKeys.findById('session').lean())!.key).toMatchObject({ kid: keyId(K2) });
    await second.close();
    second = await buildTestApp({ masterKeys: [K2], sessionKey: null, databaseName: first.config.databaseName });
    expect((await me(second, session)).statusCode).toBe(200);
    // --session: instances started afterwards no longer accept the old sessions.
    expect(rotate({ ...env, XFER_MASTER_KEY: K2.toString('base64') }, ['--session']).code).toBe(0);
    await second.close();
    second = await buildTestApp({ masterKeys: [K2], sessionKey: null, databaseName: first.config.databaseName });
    expect((await me(second, session)).statusCode).toBe(401);
    expect((await me(second, await login(second, acct.email, acct.password))).statusCode).toBe(200);
  } finally {
    await second?.close();
    await first.close();
  }
}, 120_000);

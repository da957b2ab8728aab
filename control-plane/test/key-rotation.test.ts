import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { boundTo } from '../src/lib/sealed-fields.js';
import { keyId, Vault, vaultOf, type Sealed } from '../src/lib/vault.js';
import { dropRetiredKeys, generateMasterKeyFile } from '../src/lib/key-rotation.js';
import { openWebhookSecret } from '../src/plugins/app/webhooks/webhooks.service.js';
import { auth, buildTestApp, createAccount, login, type TestAccount } from './helper.js';
import { makeConnection, SECRET, sealFormat1 } from './fixtures.js';
import { eventually } from './protocol-client.js';

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
  return { code: run.status, stderr: run.stderr, report: report as Record<string, number> & { unreadable_values: string[]; active_kid: string } };
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

test('key files: --new-key retires master.key; a running instance seals under the new key within seconds; --drop-retired', async () => {
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
    // The running instance opens the new key's values, and takes the new key up for what it seals.
    expect((await app.connections.loadSettings(acct.accountId, conn.id)).credentials).toMatchObject({ password: SECRET });
    await eventually(async () => app.vault.activeKid === run.report.active_kid, 'the instance follows master.key', 10_000);
    const fresh = await makeConnection(app, acct.apiKey, 'sftp');
    expect((await app.db.connections.findById(fresh.id).lean())!.credentials).toMatchObject({ v: 2, kid: run.report.active_kid });
    // Its record says so at once (the change wakes the heartbeat), so the drop goes ahead.
    const instanceId = app.agentHub.instanceId;
    await eventually(async () => (await app.db.instances.findById(instanceId).lean())?.active_kid === run.report.active_kid, 'the record names the new key', 10_000);
    const dropped = rotate(env, ['--drop-retired']);
    expect(dropped.code).toBe(0);
    expect(dropped.report).toMatchObject({ retired_keys_dropped: true, resealed: 0, unreadable: 0, instances_on_retired: [], values_on_retired: 0 });
    expect(existsSync(join(dataDir, 'retired-master.keys'))).toBe(false);
    expect((await app.connections.loadSettings(acct.accountId, fresh.id)).credentials).toMatchObject({ password: SECRET });
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

test('--drop-retired refuses while a live instance still seals under a retired key, naming it; a stale record does not count', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'xfer-rotate-'));
  // A heartbeat far apart, and nothing sealed: the instance has not noticed the new key yet.
  const app = await buildTestApp({ masterKeys: null, sessionKey: null, dataDir, instanceHeartbeatMs: 300_000 });
  try {
    const acct = await createAccount(app);
    const instanceId = app.agentHub.instanceId;
    const oldKid = app.vault.activeKid;
    await eventually(async () => (await app.db.instances.findById(instanceId).lean())?.active_kid === oldKid, 'the instance reports itself');
    // A dead instance's record (past live_until) on the old key is ignored.
    await app.db.instances.create({ _id: 'dead:1:00', active_kid: oldKid, key_source: 'files', started_at: new Date(0), seen_at: new Date(0), live_until: new Date(Date.now() - 1000) });
    const env = { XFER_DATA_DIR: dataDir, XFER_DB_NAME: app.config.databaseName };
    // --new-key and --drop-retired at once, then --drop-retired again: the instance has not looked yet.
    const rotated = rotate(env, ['--new-key', '--drop-retired']);
    const again = rotate(env, ['--drop-retired']);
    for (const refused of [rotated, again]) {
      expect(refused.code).toBe(6);
      expect(refused.report).toMatchObject({ retired_keys_dropped: false, unreadable: 0, changed_meanwhile: 0, instances_on_retired: [{ id: instanceId, active_kid: oldKid }] });
      expect(refused.stderr).toContain(`${instanceId} on ${oldKid}`);
      expect(refused.stderr).not.toContain('dead:1:00');
    }
    expect(existsSync(join(dataDir, 'retired-master.keys'))).toBe(true);
    // Its next seal takes the new key up and reports it; the drop then goes ahead.
    const conn = await makeConnection(app, acct.apiKey, 'sftp');
    expect((await app.db.connections.findById(conn.id).lean())!.credentials).toMatchObject({ kid: rotated.report.active_kid });
    await eventually(async () => (await app.db.instances.findById(instanceId).lean())?.active_kid === rotated.report.active_kid, 'the record names the new key', 10_000);
    const dropped = rotate(env, ['--drop-retired']);
    expect(dropped.code).toBe(0);
    expect(dropped.report).toMatchObject({ retired_keys_dropped: true, resealed: 0 });
    expect(existsSync(join(dataDir, 'retired-master.keys'))).toBe(false);
  } finally {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 120_000);

test('dropRetiredKeys waits for what an instance sealed under the old key just before it switched: a value landing then keeps the file', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'xfer-rotate-'));
  try {
    const first = vaultOf({ masterKeys: null, dataDir });
    const oldKid = first.activeKid;
    generateMasterKeyFile(dataDir);
    const now = new Date();
    // An instance that switched from the old key a moment ago: a value it sealed before may be in flight.
    await a.db.instances.create({
      _id: 'switching:1:00', active_kid: vaultOf({ masterKeys: null, dataDir }).activeKid, key_source: 'files',
      started_at: now, seen_at: now, live_until: new Date(now.getTime() + 60_000), switched_from: oldKid, switched_at: now,
    });
    const conn = await makeConnection(a, owner.apiKey, 'sftp');
    let waiting!: () => void;
    const waited = new Promise<void>((resolve) => { waiting = resolve; });
    const lines: string[] = [];
    const drop = dropRetiredKeys(a.db, dataDir, (line) => { lines.push(line); waiting(); });
    await waited;
    // The in-flight write lands while the drop waits.
    await a.db.connections.collection.updateOne({ _id: new Types.ObjectId(conn.id) }, { $set: { credentials: first.seal({ username: 'u' }, boundTo('connection.credentials', { _id: conn.id, account_id: owner.accountId })) } });
    expect(await drop).toEqual({ retired_keys_dropped: false, instances_on_retired: [], values_on_retired: 1 });
    expect(lines.join('\n')).toMatch(/waiting \d+ s for what switching:1:00 sealed before switching keys/);
    expect(existsSync(join(dataDir, 'retired-master.keys'))).toBe(true);
  } finally {
    await a.db.instances.deleteOne({ _id: 'switching:1:00' });
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 60_000);

test('dropRetiredKeys keeps the file while a value is still sealed under a retired key (sealed after the pass)', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'xfer-rotate-'));
  try {
    const first = vaultOf({ masterKeys: null, dataDir });
    const oldKid = first.activeKid;
    generateMasterKeyFile(dataDir);
    const conn = await makeConnection(a, owner.apiKey, 'sftp');
    await a.db.connections.collection.updateOne({ _id: new Types.ObjectId(conn.id) }, { $set: { credentials: first.seal({ username: 'u' }, boundTo('connection.credentials', { _id: conn.id, account_id: owner.accountId })) } });
    expect(await dropRetiredKeys(a.db, dataDir)).toEqual({ retired_keys_dropped: false, instances_on_retired: [], values_on_retired: 1 });
    expect(existsSync(join(dataDir, 'retired-master.keys'))).toBe(true);
    await a.db.connections.collection.deleteOne({ _id: new Types.ObjectId(conn.id) });
    expect(await dropRetiredKeys(a.db, dataDir)).toEqual({ retired_keys_dropped: true, instances_on_retired: [], values_on_retired: 0 });
    expect(oldKid).not.toBe(vaultOf({ masterKeys: null, dataDir }).activeKid);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a vault on key files follows master.key: one stat a second at most, the files read only when it changed', async () => {
  const keys = [[K1], [K2, K1]];
  let version = 'v1';
  const calls = { version: 0, load: 0 };
  const source = { version: () => (calls.version++, version), load: () => (calls.load++, keys[version === 'v1' ? 0 : 1]!) };
  const vault = new Vault([K1], source, 'v1');
  const changes: string[] = [];
  vault.onActiveKeyChange((kid) => changes.push(kid));
  const binding = boundTo('connection.credentials', { _id: 'c', account_id: 'a' });
  const old = vault.seal('x', binding);
  for (let i = 0; i < 1000; i++) vault.seal('x', binding);
  expect(calls).toEqual({ version: 1, load: 0 });
  version = 'v2';
  const sealed = await eventually(async () => { const s = vault.seal('y', binding); return s.kid === keyId(K2) && s; }, 'the new active key seals', 10_000);
  expect(calls).toEqual({ version: 2, load: 1 });
  expect(changes).toEqual([keyId(K2)]);
  expect(vault.open(sealed, binding)).toBe('y');
  expect(vault.open(old, binding)).toBe('x');
  // With XFER_MASTER_KEY (no source) the active key is fixed until a restart.
  expect(new Vault([K1, K2]).activeKid).toBe(keyId(K1));
});

test('each instance reports its active key in `instances`, and removes its record at a clean shutdown', async () => {
  const b = await buildTestApp({ masterKeys: [K2, K1], sessionKey: SESSION, databaseName: a.config.databaseName });
  const id = b.agentHub.instanceId;
  try {
    const record = await eventually(async () => b.db.instances.findById(id).lean(), 'the record');
    expect(record).toMatchObject({ active_kid: keyId(K2), key_source: 'env' });
    expect(record.live_until.getTime() - record.seen_at.getTime()).toBe(3 * b.config.instanceHeartbeatMs);
  } finally {
    await b.close();
  }
  expect(await a.db.instances.findById(id).lean()).toBeNull();
});

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

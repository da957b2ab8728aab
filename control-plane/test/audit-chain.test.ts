import { spawnSync } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import { createHash, randomBytes } from 'node:crypto';
import { canonical, ChainWriter, chainsToVerify, GENESIS_HASH, HEADS_COLLECTION, LEGACY_PREFIX, recordHash, verifyChain } from '../src/lib/audit-chain.js';
import { systemKeyOf } from '../src/lib/system-keys.js';
import { createIndexes } from '../src/models/index.js';
import { ConflictError } from '../src/errors.js';
import { buildTestApp, createAccount } from './helper.js';

/**
 * The audit trail is a hash chain per account: every way of tampering with stored records is
 * found by `verifyChain` and by `xfer-server audit verify`, naming the first broken record; an
 * untouched chain verifies, also after many concurrent writers.
 */
const BIN = resolve(dirname(fileURLToPath(import.meta.url)), '../dist/bin/xfer-server.js');
let app: App;
let key: Buffer;

beforeAll(async () => {
  app = await buildTestApp();
  key = await systemKeyOf(app.db, app.vault, 'audit');
});
afterAll(() => app.close());

const events = () => app.dbConnection.collection('audit_events');

/** An account with `n` records written by concurrent writers. */
async function chainOf(n: number): Promise<string> {
  const accountId = new Types.ObjectId().toHexString();
  await Promise.all(Array.from({ length: n }, (_, i) => app.audit.record({
    accountId, actor: { type: 'user', id: 'u1' }, action: 'test.write', resource: { type: 'thing', id: String(i) },
    ip: '127.0.0.1', outcome: 'success', details: { i, nested: { at: new Date(), list: [1, 'two', null], skipped: undefined } },
  })));
  return accountId;
}

const verify = (chain: string) => verifyChain(events(), key, chain);
const at = async (chain: string, seq: number) => (await events().findOne({ chain, seq }))!;

/** `xfer-server audit verify` against the test database. */
function cli(args: string[]) {
  const run = spawnSync(process.execPath, [BIN, 'audit', 'verify', ...args], {
    env: { ...process.env, MONGODB_URI: process.env.MONGODB_URI, XFER_DB_NAME: app.config.databaseName, XFER_MASTER_KEY: app.config.masterKeys![0]!.toString('base64'), XFER_DATA_DIR: app.config.dataDir },
    encoding: 'utf8', timeout: 60_000,
  });
  return { code: run.status, stdout: run.stdout, stderr: run.stderr };
}

test('concurrent writers never fork a chain: numbers 1..n, each linked to the one before; it verifies', async () => {
  const chain = await chainOf(40);
  const docs = await events().find({ chain }).sort({ seq: 1 }).toArray();
  expect(docs.map((d) => d.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
  expect(docs[0]!.prev_hash).toBe(GENESIS_HASH);
  for (let i = 1; i < docs.length; i++) expect(docs[i]!.prev_hash).toBe(docs[i - 1]!.hash);
  expect(await verify(chain)).toMatchObject({ chain, records: 40, broken: null, head: { seq: 40, hash: docs[39]!.hash } });
  // Records without an account have their own chain.
  await app.audit.record({ accountId: null, actor: { type: 'system', id: null }, action: 'test.system', outcome: 'denied' });
  expect((await verify('system')).broken).toBeNull();
  // Several instances (each its own writer with its own cached heads) appending to one chain at once.
  const instances = [new ChainWriter(events(), key), new ChainWriter(events(), key), new ChainWriter(events(), key)];
  const fields = (i: number) => ({ timestamp: new Date(), account_id: new Types.ObjectId(chain), actor: { type: 'agent', id: null }, action: 'test.multi', resource: null, ip: null, outcome: 'success', details: { i } });
  await Promise.all(instances.flatMap((w, k) => Array.from({ length: 15 }, (_, i) => w.append(fields(k * 100 + i)))));
  await app.audit.record({ accountId: chain, actor: { type: 'user', id: 'u1' }, action: 'test.after', outcome: 'success' });
  expect(await verify(chain)).toMatchObject({ records: 86, broken: null });
  // A stale head hint (a crash between a record and its hint) or none at all costs a retry, never a wrong link.
  const hints = app.dbConnection.collection(HEADS_COLLECTION);
  const third = await at(chain, 3);
  await hints.updateOne({ _id: chain as never }, { $set: { seq: 3, hash: third.hash } });
  await new ChainWriter(events(), key).append(fields(1000));
  await hints.deleteOne({ _id: chain as never });
  await new ChainWriter(events(), key).append(fields(1001));
  expect(await verify(chain)).toMatchObject({ records: 88, broken: null });
  expect(await hints.findOne({ _id: chain as never })).toMatchObject({ seq: 88 });
  const ok = cli(['--account', chain, '--json']);
  expect(ok.code).toBe(0);
  expect(JSON.parse(ok.stdout)).toMatchObject({ ok: true, chains: [{ chain, records: 88, broken: null }] });
}, 60_000);

test('an edited field is found at that record; the CLI exits non-zero naming it', async () => {
  const chain = await chainOf(8);
  const victim = await at(chain, 5);
  await events().updateOne({ _id: victim._id }, { $set: { outcome: 'failure' } });
  expect((await verify(chain)).broken).toMatchObject({ seq: 5, id: String(victim._id), problem: expect.stringMatching(/altered/) });
  const res = cli(['--account', chain]);
  expect(res.code).toBe(4);
  expect(res.stderr).toContain(`broken at record 5 (${String(victim._id)})`);
  expect(res.stdout).toContain(`${chain}: BROKEN at record 5`);
  // Without the audit key (sealed by the master key), a recomputed hash does not verify: a plain
  // SHA-256, or an HMAC under any other key, is still "altered".
  const edited = await events().findOne({ _id: victim._id });
  const { hash: _h, ...rest } = edited!;
  await events().updateOne({ _id: victim._id }, { $set: { hash: createHash('sha256').update(canonical(rest)).digest('hex') } });
  expect((await verify(chain)).broken).toMatchObject({ seq: 5, problem: expect.stringMatching(/altered/) });
  await events().updateOne({ _id: victim._id }, { $set: { hash: recordHash(edited!, randomBytes(32)) } });
  expect((await verify(chain)).broken).toMatchObject({ seq: 5, problem: expect.stringMatching(/altered/) });
  // Even with the key, the next record still names the old hash.
  await events().updateOne({ _id: victim._id }, { $set: { hash: recordHash(edited!, key) } });
  expect((await verify(chain)).broken).toMatchObject({ seq: 6, problem: expect.stringMatching(/prev_hash differs/) });
}, 60_000);

test('a deleted record is found where it is missing; a deleted tail changes the head', async () => {
  const chain = await chainOf(8);
  const headBefore = (await verify(chain)).head;
  await events().deleteOne({ chain, seq: 3 });
  expect((await verify(chain)).broken).toMatchObject({ seq: 3, problem: expect.stringMatching(/record 3 is missing/) });
  const other = await chainOf(4);
  const full = (await verify(other)).head;
  await events().deleteOne({ chain: other, seq: 4 });
  // Truncation keeps a valid chain: only a head kept elsewhere shows it (docs/security.md).
  expect(await verify(other)).toMatchObject({ broken: null, head: { seq: 3 } });
  expect((await verify(other)).head).not.toEqual(full);
  expect(headBefore).toMatchObject({ seq: 8 });
}, 60_000);

test('reordered records and a record inserted in the middle are found', async () => {
  const chain = await chainOf(6);
  const [three, four] = [await at(chain, 3), await at(chain, 4)];
  await events().updateOne({ _id: three._id }, { $set: { seq: -1 } });
  await events().updateOne({ _id: four._id }, { $set: { seq: 3 } });
  await events().updateOne({ _id: three._id }, { $set: { seq: 4 } });
  expect((await verify(chain)).broken).toMatchObject({ seq: 3, id: String(four._id) });

  const other = await chainOf(6);
  for (let seq = 6; seq >= 4; seq--) await events().updateOne({ chain: other, seq }, { $set: { seq: seq + 1 } });
  const before = await at(other, 3);
  const forged: Record<string, unknown> = {
    _id: new Types.ObjectId(), timestamp: new Date(), account_id: new Types.ObjectId(other), actor: { type: 'user', id: 'u1' },
    action: 'test.write', resource: null, ip: null, outcome: 'success', chain: other, seq: 4, prev_hash: before.hash,
  };
  // Forged with the key itself (an insider holding the master key): the record after it breaks.
  forged.hash = recordHash(forged, key);
  await events().insertOne(forged);
  expect((await verify(other)).broken).toMatchObject({ seq: 5, problem: expect.stringMatching(/prev_hash differs/) });
}, 60_000);

test('records written before the chain are set aside at start, outside every chain', async () => {
  const legacy = await events().insertOne({ timestamp: new Date(), account_id: null, actor: { type: 'system', id: null }, action: 'old.record', outcome: 'success' });
  await createIndexes(app.db);
  expect(await events().findOne({ _id: legacy.insertedId })).toMatchObject({ chain: `${LEGACY_PREFIX}${String(legacy.insertedId)}`, seq: 0 });
  expect(await chainsToVerify(events())).not.toContain(`${LEGACY_PREFIX}${String(legacy.insertedId)}`);
  expect((await verify('system')).broken).toBeNull();
});

test('the activity API still shows records as before', async () => {
  const acct = await createAccount(app);
  const res = await app.inject({ method: 'GET', url: '/api/v1/activity?limit=5', headers: { authorization: `Bearer ${acct.apiKey}` } });
  expect(res.statusCode).toBe(200);
  expect(res.json().data).toEqual([expect.objectContaining({ action: 'account.bootstrap', resource: { type: 'account', id: acct.accountId } })]);
  expect(Object.keys(res.json().data[0])).not.toContain('hash');
});

describe('a record is written with the change it describes (write-ahead)', () => {
  const account = () => new Types.ObjectId().toHexString();
  const fakeRequest = (accountId: string) => ({ ip: '127.0.0.1', principal: { accountId, actor: { type: 'user', id: 'u1' } } }) as never;

  test('announced then failed: a failure record names the announced one; refused before announcing: nothing', async () => {
    const acct = account();
    await expect(app.audit.change(fakeRequest(acct), async (announce) => {
      await announce({ action: 'thing.update', outcome: 'success', resource: { type: 'thing', id: 't1' }, details: { changed: ['x'] } });
      throw new ConflictError('the write failed');
    })).rejects.toThrow('the write failed');
    const [announced, failed] = await events().find({ chain: acct }).sort({ seq: 1 }).toArray();
    expect(announced).toMatchObject({ action: 'thing.update', outcome: 'success', resource: { type: 'thing', id: 't1' } });
    expect(failed).toMatchObject({ action: 'thing.update', outcome: 'failure', resource: { type: 'thing', id: 't1' }, details: { announced: String(announced!._id), reason: 'the write failed' } });
    const other = account();
    await expect(app.audit.change(fakeRequest(other), async () => { throw new Error('refused by a check'); })).rejects.toThrow('refused by a check');
    expect(await events().countDocuments({ chain: other })).toBe(0);
    expect(await app.audit.change(fakeRequest(other), async (announce) => {
      await announce({ action: 'thing.create', outcome: 'success' });
      return 42;
    })).toBe(42);
    expect(await events().countDocuments({ chain: other })).toBe(1);
  });

  test('a connection create: its record exists before the insert runs; an insert that dies leaves it and a failure record', async () => {
    const acct = await createAccount(app);
    const original = app.db.connections.create.bind(app.db.connections);
    let seenBeforeInsert: unknown = null;
    (app.db.connections as unknown as { create: unknown }).create = async () => {
      seenBeforeInsert = await events().findOne({ chain: acct.accountId, action: 'connection.create' });
      throw new Error('simulated crash during the insert');
    };
    try {
      const res = await app.inject({
        method: 'POST', url: '/api/v1/connections', headers: { authorization: `Bearer ${acct.apiKey}` },
        payload: { name: 'wal', type: 'sftp', host: 'sftp.example.test', credentials: { username: 'u', password: 'p' } },
      });
      expect(res.statusCode).toBe(500);
    } finally {
      (app.db.connections as unknown as { create: unknown }).create = original;
    }
    expect(seenBeforeInsert).toMatchObject({ outcome: 'success', details: { name: 'wal', type: 'sftp' } });
    const failure = await events().findOne({ chain: acct.accountId, action: 'connection.create', outcome: 'failure' });
    // A server error's own message stays in the log: it may quote what the account must not read.
    expect(failure!.details).toEqual({ announced: String((seenBeforeInsert as { _id: unknown })._id), reason: 'server error (see the log)' });
    expect((await verify(acct.accountId)).broken).toBeNull();
  });
});

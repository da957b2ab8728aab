import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import type { Sealed } from '../src/lib/vault.js';
import { boundTo } from '../src/lib/sealed-fields.js';
import { openWebhookSecret } from '../src/plugins/app/webhooks/webhooks.service.js';
import { auth, buildTestApp, createAccount, type TestAccount } from './helper.js';
import { makeConnection, SECRET, sealFormat1 } from './fixtures.js';

/**
 * Sealed values are bound to their account, their record and what they are there (AES-GCM
 * additional data): a row copied into another record, or another tenant's, does not open.
 * Values sealed before the binding (format 1) still open.
 */
let app: App;
let alice: TestAccount;
let mallory: TestAccount;

beforeAll(async () => {
  app = await buildTestApp();
  alice = await createAccount(app);
  mallory = await createAccount(app);
});
afterAll(() => app.close());

const raw = (name: string) => app.dbConnection.collection(name);

test('connection credentials copied into another tenant\'s connection (or another of the same account) do not open', async () => {
  const victim = await makeConnection(app, alice.apiKey, 'sftp');
  const own = await makeConnection(app, mallory.apiKey, 'sftp');
  const sibling = await makeConnection(app, alice.apiKey, 'sftp');
  const stolen = (await raw('connections').findOne({ _id: new Types.ObjectId(victim.id) }))!.credentials as Sealed;
  expect(stolen.v).toBe(2);
  for (const [account, target] of [[mallory, own], [alice, sibling]] as const) {
    await raw('connections').updateOne({ _id: new Types.ObjectId(target.id) }, { $set: { credentials: stolen } });
    await expect(app.connections.loadSettings(account.accountId, target.id)).rejects.toThrow(/does not open for this record/);
  }
  // The same row moved with its _id into the other account: still bound to the first account.
  const doc = await raw('connections').findOne({ _id: new Types.ObjectId(victim.id) });
  await raw('connections').updateOne({ _id: doc!._id }, { $set: { account_id: new Types.ObjectId(mallory.accountId), name: `moved-${victim.id}` } });
  await expect(app.connections.loadSettings(mallory.accountId, victim.id)).rejects.toThrow(/does not open for this record/);
  // Where it belongs it opens.
  await raw('connections').updateOne({ _id: doc!._id }, { $set: { account_id: new Types.ObjectId(alice.accountId) } });
  expect((await app.connections.loadSettings(alice.accountId, victim.id)).credentials).toMatchObject({ password: SECRET });
});

test('webhook secrets and MFA secrets are bound the same way', async () => {
  const create = (acct: TestAccount) => app.inject({
    method: 'POST', url: '/api/v1/webhooks', headers: auth(acct.apiKey), payload: { url: 'https://8.8.8.8:8443/hooks/xfer', events: ['transfer.completed'] },
  });
  const [a, m] = [await create(alice), await create(mallory)];
  expect([a.statusCode, m.statusCode]).toEqual([201, 201]);
  const victim = await app.db.webhooks.findById(a.json().data.id).lean();
  expect(openWebhookSecret(app.vault, victim!)).toBe(a.json().data.secret);
  const own = await app.db.webhooks.findById(m.json().data.id).lean();
  expect(() => openWebhookSecret(app.vault, { ...own!, secret: victim!.secret })).toThrow(/does not open for this record/);

  // MFA secrets (stored through the API in mfa.test.ts): another user's, or another purpose, do not open.
  const value = app.vault.seal('JBSWY3DPEHPK3PXP', boundTo('user.mfa', { _id: alice.userId, account_id: alice.accountId }));
  expect(() => app.vault.open(value, boundTo('user.mfa', { _id: mallory.userId, account_id: alice.accountId }))).toThrow(/does not open/);
  expect(() => app.vault.open(value, boundTo('webhook.secret', { _id: alice.userId, account_id: alice.accountId }))).toThrow(/does not open/);
  expect(app.vault.open(value, boundTo('user.mfa', { _id: alice.userId, account_id: alice.accountId }))).toBe('JBSWY3DPEHPK3PXP');
});

test('a value sealed before binding (format 1, no additional data) still opens; a forged format does not', async () => {
  const conn = await makeConnection(app, alice.apiKey, 'sftp');
  const legacy = sealFormat1(app.config.masterKeys![0]!, { username: 'old', password: 'format-1' });
  await raw('connections').updateOne({ _id: new Types.ObjectId(conn.id) }, { $set: { credentials: legacy } });
  expect((await app.connections.loadSettings(alice.accountId, conn.id)).credentials).toEqual({ username: 'old', password: 'format-1' });
  expect(app.vault.isStale(legacy)).toBe(true);
  // Dropping `v` from a bound value does not make it open as format 1 elsewhere: the tag covers the additional data.
  const bound = (await raw('connections').findOne({ _id: new Types.ObjectId((await makeConnection(app, alice.apiKey, 'sftp')).id) }))!.credentials as Sealed;
  const { v: _v, ...stripped } = bound;
  await raw('connections').updateOne({ _id: new Types.ObjectId(conn.id) }, { $set: { credentials: stripped } });
  await expect(app.connections.loadSettings(alice.accountId, conn.id)).rejects.toThrow(/does not open/);
  await raw('connections').updateOne({ _id: new Types.ObjectId(conn.id) }, { $set: { credentials: { ...bound, v: 3 } } });
  await expect(app.connections.loadSettings(alice.accountId, conn.id)).rejects.toThrow(/format 3 is not known/);
});

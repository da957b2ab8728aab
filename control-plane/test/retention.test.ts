import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateBucketCommand, DeleteBucketCommand, DeleteObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { Types } from 'mongoose';
import type { App } from '../src/app.js';
import type { FileStoreConfig } from '../src/config.js';
import { appendToChain, EXPIRE_ACTION, verifyChain } from '../src/lib/audit-chain.js';
import { systemKeyOf } from '../src/lib/system-keys.js';
import { auth, buildTestApp, createAccount, expectError, login, type TestAccount } from './helper.js';
import { uploaded } from './files-helper.js';

// The retention sweeper (plugins/app/retention/): deleted files leave the store, on both file-store
// backends, and stay in the audit trail; old audit records expire behind a checkpoint the chain
// verifies from; delivered outbox events and finished deliveries go after their fixed windows;
// two instances never sweep one interval twice.

const DAY = 24 * 60 * 60 * 1000;
const env = process.env;
const s3Server = {
  endpoint: env.XFER_TEST_S3_ENDPOINT!,
  region: env.XFER_TEST_S3_REGION ?? 'us-east-1',
  accessKeyId: env.XFER_TEST_S3_ACCESS_KEY!,
  secretAccessKey: env.XFER_TEST_S3_SECRET_KEY!,
};

/** A file-store backend and its raw contents, seen without the store. */
interface Backend {
  config: FileStoreConfig;
  objects(): Promise<string[]>;
  destroy(): Promise<void>;
}

function localBackend(): Backend {
  const root = mkdtempSync(join(tmpdir(), 'xfer-retention-'));
  const dir = join(root, 'files');
  return {
    config: { kind: 'local', dir },
    objects: async () => {
      const base = join(dir, 'objects');
      if (!existsSync(base)) return [];
      return readdirSync(base, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).map((e) => e.name);
    },
    destroy: async () => rmSync(root, { recursive: true, force: true }),
  };
}

async function s3Backend(): Promise<Backend> {
  const bucket = `xfer-retention-${randomBytes(5).toString('hex')}`;
  const raw = new S3Client({ endpoint: s3Server.endpoint, region: s3Server.region, forcePathStyle: true, credentials: s3Server });
  await raw.send(new CreateBucketCommand({ Bucket: bucket }));
  const objects = async () => ((await raw.send(new ListObjectsV2Command({ Bucket: bucket }))).Contents ?? []).map((o) => o.Key!);
  return {
    config: { kind: 's3', endpoint: s3Server.endpoint, bucket, prefix: 'xfer/', region: s3Server.region, accessKeyId: s3Server.accessKeyId, secretAccessKey: s3Server.secretAccessKey, forcePathStyle: true },
    objects,
    destroy: async () => {
      for (const key of await objects()) await raw.send(new DeleteObjectCommand({ Bucket: bucket, Key: key }));
      await raw.send(new DeleteBucketCommand({ Bucket: bucket }));
      raw.destroy();
    },
  };
}

const activityOf = async (app: App, token: string, query: string) => {
  const res = await app.inject({ method: 'GET', url: `/api/v1/activity?limit=1000&${query}`, headers: auth(token) });
  expect(res.statusCode).toBe(200);
  return res.json().data as Array<{ action: string; outcome: string; actor: { type: string }; resource: { id: string } | null; details?: Record<string, unknown> }>;
};

describe.each(['local', 's3'] as const)('deleted files on the %s file store', (kind) => {
  let app: App;
  let backend: Backend;
  let owner: TestAccount;

  beforeAll(async () => {
    backend = kind === 'local' ? localBackend() : await s3Backend();
    app = await buildTestApp({ fileStore: backend.config, scanner: { kind: 'none' } });
    await app.retention.stop();
    owner = await createAccount(app);
  });
  afterAll(async () => {
    await app.close();
    await backend.destroy();
  });

  it('a file deleted with deleted_files_days 0 is gone from storage after the sweep and still in the audit trail', async () => {
    // 0 is a test setting: the API's minimum is 1 day (docs/operations.md "Retention").
    await app.settings.put({ accountId: owner.accountId, actor: { type: 'system', id: null }, ip: null }, { accountId: owner.accountId, userId: null }, 'retention',
      { audit_days: 365, deleted_files_days: 0 }, {});
    const doomed = await uploaded(app, owner.apiKey, 'doomed.txt', 'content that goes');
    const kept = await uploaded(app, owner.apiKey, 'kept.txt', 'content that stays');
    expect(await backend.objects()).toHaveLength(2);
    expect((await app.inject({ method: 'DELETE', url: `/api/v1/files/${doomed.id}`, headers: auth(owner.apiKey) })).statusCode).toBe(200);
    // Deleted but not swept yet: the content is still there.
    expect(await backend.objects()).toHaveLength(2);

    const report = await app.retention.sweep();
    expect(report.files_purged).toBe(1);
    const left = await backend.objects();
    expect(left).toHaveLength(1);
    const keptDoc = await app.db.files.findById(kept.id).lean();
    expect(left[0]!.endsWith(keptDoc!.storage_key.split('/').pop()!)).toBe(true);
    expect((await app.inject({ method: 'GET', url: `/api/v1/files/${kept.id}/download`, headers: auth(owner.apiKey) })).body).toBe('content that stays');

    // The record stays, marked purged; the API still answers 404 for it; the trail names every step.
    const record = await app.db.files.findById(doomed.id).lean();
    expect(record).toMatchObject({ name: 'doomed.txt', deleted_at: expect.any(Date), purged_at: expect.any(Date) });
    expectError(await app.inject({ method: 'GET', url: `/api/v1/files/${doomed.id}`, headers: auth(owner.apiKey) }), 404);
    const trail = await activityOf(app, owner.apiKey, `resource_id=${doomed.id}`);
    expect(trail.map((e) => `${e.action}:${e.outcome}`).reverse()).toEqual(['file.upload:success', 'file.delete:success', 'file.purge:success']);
    expect(trail[0]).toMatchObject({ actor: { type: 'system' }, details: { name: 'doomed.txt', retention_days: 0 } });

    // A second sweep has nothing left to do.
    expect((await app.retention.sweep()).files_purged).toBe(0);
    expect(await backend.objects()).toHaveLength(1);
  });

  it('a file deleted within the account\'s retention stays in storage', async () => {
    const other = await createAccount(app);
    const file = await uploaded(app, other.apiKey, 'recent.txt', 'recently deleted');
    await app.inject({ method: 'DELETE', url: `/api/v1/files/${file.id}`, headers: auth(other.apiKey) });
    const before = (await backend.objects()).length;
    // Default 30 days: not yet; 31 days from now: purged.
    expect((await app.retention.sweep()).files_purged).toBe(0);
    expect(await backend.objects()).toHaveLength(before);
    expect((await app.retention.sweep(new Date(Date.now() + 31 * DAY))).files_purged).toBe(1);
    expect(await backend.objects()).toHaveLength(before - 1);
  });
});

describe('audit records, outbox events and deliveries', () => {
  let app: App;
  let key: Buffer;
  const events = () => app.db.auditEvents.collection;

  beforeAll(async () => {
    app = await buildTestApp();
    key = await systemKeyOf(app.db, app.vault, 'audit');
    // The sweeps below are the test's own: the app's loop (which swept once at start) stays out.
    await app.retention.stop();
  });
  afterAll(() => app.close());

  /** An account (no owner: its chain holds only what the test writes) with `old` records of `ageDays` then `recent` new ones. */
  async function accountWithHistory(old: number, ageDays: number, recent: number): Promise<string> {
    const account = await app.db.accounts.create({ name: 'history', plan: 'team' });
    const write = (timestamp: Date, i: number) => appendToChain(events(), key, {
      timestamp, account_id: account._id, actor: { type: 'user', id: 'u1' }, action: 'test.write', resource: { type: 'thing', id: String(i) }, ip: null, outcome: 'success',
    });
    for (let i = 0; i < old; i++) await write(new Date(Date.now() - ageDays * DAY + i * 1000), i);
    for (let i = 0; i < recent; i++) await write(new Date(), old + i);
    return String(account._id);
  }

  it('expires records older than the retention behind a checkpoint: the chain still verifies, and tampering after it is found', async () => {
    const chain = await accountWithHistory(5, 400, 3);
    const report = await app.retention.sweep();
    expect(report.audit_expired).toBe(5);
    const left = await events().find({ chain }).sort({ seq: 1 }).toArray();
    expect(left.map((d) => d.seq)).toEqual([6, 7, 8, 9]);
    expect(left[3]).toMatchObject({ action: EXPIRE_ACTION, actor: { type: 'system', id: null }, details: { through_seq: 5, first_seq: 1, count: 5, retention_days: 365 } });
    expect(await verifyChain(events(), key, chain)).toMatchObject({ broken: null, records: 4, expired_through: { seq: 5 }, head: { seq: 9 } });

    // Nothing more to expire: a second sweep writes nothing.
    await app.retention.sweep();
    expect(await events().countDocuments({ chain })).toBe(4);

    // Removing a record after the checkpoint breaks the chain where it was.
    await events().deleteOne({ chain, seq: 6 });
    expect((await verifyChain(events(), key, chain)).broken).toMatchObject({ seq: 6, problem: expect.stringMatching(/record 6 is missing/) });
  });

  it('keeps records the account keeps longer, and never less than the installation minimum', async () => {
    const longer = await accountWithHistory(2, 380, 1);
    await app.db.settings.create({ account_id: longer, user_id: null, name: 'retention', value: { audit_days: 400, deleted_files_days: 30 } });
    // A stored value under the minimum (an older installation's) is raised to it.
    const shorter = await accountWithHistory(2, 100, 1);
    await app.db.settings.create({ account_id: shorter, user_id: null, name: 'retention', value: { audit_days: 30, deleted_files_days: 30 } });
    await app.retention.sweep();
    expect(await events().countDocuments({ chain: longer })).toBe(3);
    expect(await events().countDocuments({ chain: shorter })).toBe(3);
    expect(await app.retention.retentionOf(shorter)).toEqual({ auditDays: 365, deletedFilesDays: 30 });
  });

  it('an expired prefix is never the whole chain: the newest record stays', async () => {
    const chain = await accountWithHistory(3, 500, 0);
    await app.retention.sweep();
    const left = await events().find({ chain }).sort({ seq: 1 }).toArray();
    expect(left.map((d) => [d.seq, d.action])).toEqual([[3, 'test.write'], [4, EXPIRE_ACTION]]);
    expect(await verifyChain(events(), key, chain)).toMatchObject({ broken: null, expired_through: { seq: 2 } });
  });

  it('deletes delivered outbox events and finished deliveries (with their attempts) after their windows; pending ones stay', async () => {
    const account = new Types.ObjectId();
    // An id made `daysAgo` (its first 4 bytes are the time), unique by its random rest.
    const at = (daysAgo: number) => new Types.ObjectId(
      Types.ObjectId.createFromTime(Math.floor((Date.now() - daysAgo * DAY) / 1000)).toHexString().slice(0, 8) + randomBytes(8).toString('hex'),
    );
    const outbox = await app.db.outboxEvents.insertMany([
      { _id: at(8), account_id: account, type: 'file.uploaded', data: {}, status: 'done' },
      { _id: at(8), account_id: account, type: 'file.uploaded', data: {}, status: 'pending' },
      { _id: at(6), account_id: account, type: 'file.uploaded', data: {}, status: 'done' },
    ]);
    const delivery = (id: Types.ObjectId, status: string) => ({
      _id: id, account_id: account, webhook_id: new Types.ObjectId(), event_id: new Types.ObjectId(), event: 'file.uploaded', payload: '{}', status,
    });
    const deliveries = await app.db.webhookDeliveries.insertMany([delivery(at(31), 'delivered'), delivery(at(31), 'failed'), delivery(at(31), 'pending'), delivery(at(29), 'delivered')]);
    for (const d of deliveries) {
      await app.db.webhookAttempts.create({ account_id: account, delivery_id: d._id, n: 1, instance_id: 'i', started_at: new Date(), lease_expires_at: new Date() });
    }
    const report = await app.retention.sweep();
    expect(report).toMatchObject({ outbox_deleted: 1, deliveries_deleted: 2 });
    expect((await app.db.outboxEvents.find({ account_id: account }).lean()).map((e) => String(e._id)).sort()).toEqual([outbox[1]!._id, outbox[2]!._id].map(String).sort());
    expect((await app.db.webhookDeliveries.find({ account_id: account }).lean()).map((d) => d.status).sort()).toEqual(['delivered', 'pending']);
    expect(await app.db.webhookAttempts.countDocuments({ account_id: account })).toBe(2);
  });

  it('instances side by side: one claims the interval and sweeps, the other skips', async () => {
    const second = await buildTestApp({ databaseName: app.config.databaseName });
    try {
      const now = new Date(Date.now() + 3650 * DAY);
      const results = await Promise.all([app.retention.runSlot(now), second.retention.runSlot(now), app.retention.runSlot(now)]);
      expect(results.filter((r) => r !== null)).toHaveLength(1);
    } finally {
      await second.close();
    }
  });
});

describe('PUT /settings/retention', () => {
  let app: App;
  beforeAll(async () => {
    app = await buildTestApp({ retention: { sweepIntervalMs: 3600_000, auditMinDays: 400, outboxDays: 7, deliveryDays: 30, batchSize: 500, maxBatches: 20 } });
  });
  afterAll(() => app.close());

  it('refuses audit_days below the installation minimum, naming the field', async () => {
    const owner = await createAccount(app);
    const session = await login(app, owner.email, owner.password);
    const put = (payload: Record<string, unknown>) => app.inject({ method: 'PUT', url: '/api/v1/settings/retention', headers: auth(session), payload });
    expectError(await put({ audit_days: 399 }), 400, 'body.audit_days must be at least 400 (this installation\'s minimum audit retention)');
    expect((await put({ audit_days: 400 })).json().data).toMatchObject({ audit_days: 400 });
    expectError(await put({ deleted_files_days: 0 }), 400, /deleted_files_days/);
  });
});

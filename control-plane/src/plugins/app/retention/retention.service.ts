import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { Types } from 'mongoose';
import { RETENTION_LIMITS } from '@xfer/shared';
import type { RetentionConfig } from '../../../config.js';
import { deleteThrough, expirablePrefix, EXPIRE_ACTION, SYSTEM_CHAIN } from '../../../lib/audit-chain.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';
import { Loop } from '../../../lib/loop.js';
import type { Models } from '../../../models/index.js';
import type { AuditService } from '../access/index.js';
import type { FileStore } from '../files/index.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const SYSTEM = { type: 'system' as const, id: null };
/** Finished webhook deliveries (shared WEBHOOK_DELIVERY_STATUSES but `pending`). */
const FINISHED_DELIVERIES = ['delivered', 'failed', 'cancelled'];
/** How long the claims of past sweeps are kept (they only say who swept when). */
const SWEEP_CLAIMS_DAYS = 7;

/** What the retention sweeper needs. */
export interface RetentionServiceOptions {
  db: Models;
  store: FileStore;
  audit: AuditService;
  config: RetentionConfig;
  log: Pick<FastifyBaseLogger, 'info' | 'warn'>;
  /** Names this instance in its sweep claims. */
  instanceId?: string;
}

/** What one sweep removed. */
export interface SweepReport {
  files_purged: number;
  audit_expired: number;
  outbox_deleted: number;
  deliveries_deleted: number;
}

/** An account's retention setting in force (routes/settings/account-settings.ts stores it; defaults: RETENTION_LIMITS). */
export interface AccountRetention {
  /** Audit records are kept at least this long: the account's `audit_days`, never below the operator's minimum. */
  auditDays: number;
  /** Deleted files' content is removed from the store this long after the delete. */
  deletedFilesDays: number;
}

/** `_id`s created before `date` (an ObjectId holds its creation second). */
const idsBefore = (date: Date) => ({ $lt: Types.ObjectId.createFromTime(Math.max(0, Math.floor(date.getTime() / 1000))) });

/**
 * The retention sweeper (docs/operations.md "Retention"): enforces `/settings/retention` and the
 * operator's fixed windows. Every instance runs it; of the instances waking in one interval, the
 * one that claims the interval's slot (`retention_sweeps`, a unique `_id`) sweeps, and every step
 * is idempotent, so a sweep that died half-way, or two that overlap, remove each thing once.
 *
 * - Deleted files: content removed from the store `deleted_files_days` after the delete; the
 *   record stays, marked `purged_at`, and the purge is audited (`file.purge`, write-ahead).
 * - Audit records older than `audit_days` (at least `auditMinDays`): a chain's oldest records are
 *   deleted after an `audit.expire` record naming the last of them was appended, the checkpoint
 *   from which `verifyChain` walks the rest (lib/audit-chain.ts).
 * - Delivered outbox events after `outboxDays`; finished webhook deliveries and their attempts
 *   after `deliveryDays`. (Rate-limit counts and sign-in attempts are removed by their own services
 *   when their windows end: rate-limit.service.ts, login-lockout.service.ts.)
 *
 * Each kind is handled in batches of `batchSize`, at most `maxBatches` per sweep (for files and
 * audit records: per account); what is left waits for the next sweep.
 */
export class RetentionService {
  private readonly o: RetentionServiceOptions;
  private readonly instanceId: string;
  private readonly loop: Loop;

  constructor(o: RetentionServiceOptions) {
    this.o = o;
    this.instanceId = o.instanceId ?? randomUUID();
    this.loop = new Loop(async () => {
      const report = await this.runSlot();
      if (report && Object.values(report).some((n) => n > 0)) o.log.info({ retention: report }, 'retention sweep');
    }, o.config.sweepIntervalMs, (err) => o.log.warn({ err }, 'retention sweep failed; tried again next interval'));
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Sweeps if this instance claims the interval of `now`; null when another instance did. */
  async runSlot(now = new Date()): Promise<SweepReport | null> {
    const slot = String(Math.floor(now.getTime() / this.o.config.sweepIntervalMs));
    try {
      await this.o.db.retentionSweeps.create({ _id: slot, instance: this.instanceId, started_at: now });
    } catch (err) {
      if (isDuplicateKey(err)) return null;
      throw err;
    }
    await this.o.db.retentionSweeps.deleteMany({ started_at: { $lt: new Date(now.getTime() - SWEEP_CLAIMS_DAYS * DAY_MS) } });
    return this.sweep(now);
  }

  /** One sweep as of `now`, without the claim (`runSlot` claims first). */
  async sweep(now = new Date()): Promise<SweepReport> {
    const report: SweepReport = { files_purged: 0, audit_expired: 0, outbox_deleted: 0, deliveries_deleted: 0 };
    const accounts = this.o.db.accounts.find({}, { _id: 1 }).sort({ _id: 1 }).lean().cursor();
    try {
      for await (const account of accounts) {
        const retention = await this.retentionOf(account._id);
        report.files_purged += await this.purgeFiles(account._id, retention.deletedFilesDays, now);
        report.audit_expired += await this.expireAudit(account._id, retention.auditDays, now);
      }
    } finally {
      await accounts.close();
    }
    report.audit_expired += await this.expireAudit(null, this.o.config.auditMinDays, now);
    report.outbox_deleted = await this.deleteOutbox(now);
    report.deliveries_deleted = await this.deleteDeliveries(now);
    return report;
  }

  /** The retention in force for an account. */
  async retentionOf(accountId: Types.ObjectId | string): Promise<AccountRetention> {
    const doc = await this.o.db.settings.findOne({ account_id: accountId, user_id: null, name: 'retention' }, { value: 1 }).lean();
    const value = (doc?.value ?? {}) as { audit_days?: number; deleted_files_days?: number };
    return {
      auditDays: Math.max(value.audit_days ?? RETENTION_LIMITS.audit_days.default, this.o.config.auditMinDays),
      deletedFilesDays: value.deleted_files_days ?? RETENTION_LIMITS.deleted_files_days.default,
    };
  }

  /**
   * Removes from the store the content of the account's files deleted more than `days` ago, oldest
   * deletion first; each purge is announced in the audit trail before the content goes (a store
   * error leaves a `failure` record and the file for the next sweep).
   */
  private async purgeFiles(accountId: Types.ObjectId, days: number, now: Date): Promise<number> {
    const { db, store, audit, config } = this.o;
    const before = new Date(now.getTime() - days * DAY_MS);
    let purged = 0;
    for (let batch = 0; batch < config.maxBatches; batch++) {
      const files = await db.files.find({ account_id: accountId, purged_at: null, deleted_at: { $ne: null, $lt: before } })
        .sort({ deleted_at: 1 }).limit(config.batchSize).lean();
      for (const file of files) {
        const id = String(file._id);
        await audit.change({ accountId, actor: SYSTEM, ip: null }, async (announce) => {
          await announce({
            action: 'file.purge', outcome: 'success', resource: { type: 'file', id },
            details: { name: file.name, path: file.path, size: file.size, sha256: file.sha256, deleted_at: file.deleted_at!.toISOString(), retention_days: days },
          });
          await store.remove(file.storage_key);
          await db.files.updateOne({ _id: file._id, purged_at: null }, { $set: { purged_at: now } });
        });
        purged++;
      }
      if (files.length < config.batchSize) break;
    }
    return purged;
  }

  /**
   * Expires a chain's records older than `days`, `batchSize` at a time: the `audit.expire`
   * checkpoint first (in the same chain, so it is hashed and linked like any record), then the
   * records it names.
   */
  private async expireAudit(accountId: Types.ObjectId | null, days: number, now: Date): Promise<number> {
    const { db, audit, config } = this.o;
    const collection = db.auditEvents.collection;
    const chain = accountId ? String(accountId) : SYSTEM_CHAIN;
    const before = new Date(now.getTime() - days * DAY_MS);
    let expired = 0;
    for (let batch = 0; batch < config.maxBatches; batch++) {
      const prefix = await expirablePrefix(collection, chain, before, config.batchSize);
      if (!prefix) break;
      await audit.record({
        accountId, actor: SYSTEM, action: EXPIRE_ACTION, outcome: 'success', resource: { type: 'audit_chain', id: chain },
        details: {
          through_seq: prefix.through.seq, through_hash: prefix.through.hash, through_timestamp: prefix.through.timestamp.toISOString(),
          first_seq: prefix.first_seq, count: prefix.count, before: before.toISOString(), retention_days: days,
        },
      });
      expired += await deleteThrough(collection, chain, prefix.through.seq);
      if (prefix.count < config.batchSize) break;
    }
    return expired;
  }

  /** Deletes outbox events delivered (fanned out) more than `outboxDays` ago; pending ones stay. */
  private async deleteOutbox(now: Date): Promise<number> {
    const { db, config } = this.o;
    const filter = { status: 'done', _id: idsBefore(new Date(now.getTime() - config.outboxDays * DAY_MS)) };
    let deleted = 0;
    for (let batch = 0; batch < config.maxBatches; batch++) {
      const ids = (await db.outboxEvents.find(filter, { _id: 1 }).sort({ _id: 1 }).limit(config.batchSize).lean()).map((d) => d._id);
      if (ids.length === 0) break;
      deleted += (await db.outboxEvents.deleteMany({ _id: { $in: ids } })).deletedCount;
      if (ids.length < config.batchSize) break;
    }
    return deleted;
  }

  /** Deletes finished webhook deliveries created more than `deliveryDays` ago, their attempts first. */
  private async deleteDeliveries(now: Date): Promise<number> {
    const { db, config } = this.o;
    const filter = { status: { $in: FINISHED_DELIVERIES }, _id: idsBefore(new Date(now.getTime() - config.deliveryDays * DAY_MS)) };
    let deleted = 0;
    for (let batch = 0; batch < config.maxBatches; batch++) {
      const ids = (await db.webhookDeliveries.find(filter, { _id: 1 }).sort({ _id: 1 }).limit(config.batchSize).lean()).map((d) => d._id);
      if (ids.length === 0) break;
      await db.webhookAttempts.deleteMany({ delivery_id: { $in: ids } });
      deleted += (await db.webhookDeliveries.deleteMany({ _id: { $in: ids } })).deletedCount;
      if (ids.length < config.batchSize) break;
    }
    return deleted;
  }
}

import { Types } from 'mongoose';
import type { Models } from '../../../models/index.js';
import type { TransferQueueDoc } from '../../../models/transfer-queue.model.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';

/** A waiting transfer's entry in `transfer_queue` (models/transfer-queue.model.ts). */
export type QueueEntry = TransferQueueDoc & { _id: Types.ObjectId };
type Id = string | Types.ObjectId;

const oid = (id: Id) => (typeof id === 'string' ? new Types.ObjectId(id) : id);

/** Where a page of the queue goes on from: after this entry in queue order. */
export type QueueCursor = Pick<QueueEntry, '_id' | 'queued_at'>;

/**
 * The transfers waiting for an agent, one document each, in each account's order of `queued_at`
 * (then `_id`). Inserting an entry and deleting it are the exact operations here (a unique `_id`,
 * `deleteOne`), so whoever inserts makes the transfer wait and whoever deletes claims it, once,
 * across any number of instances. Reads cost the entries they return, never the transfer history.
 */
export class TransferQueue {
  constructor(private readonly db: Models) {}

  /** Inserts the entry; false when the transfer has one already (it waits, or someone else is making it wait). */
  async add(entry: QueueEntry): Promise<boolean> {
    try {
      await this.db.transferQueue.collection.insertOne(entry);
      return true;
    } catch (err) {
      if (isDuplicateKey(err)) return false;
      throw err;
    }
  }

  /** Claims the entry of attempt `attempt` by deleting it: true for exactly one caller. */
  async claim(id: Id, attempt: number): Promise<boolean> {
    const res = await this.db.transferQueue.deleteOne({ _id: oid(id), attempt });
    return res.deletedCount === 1;
  }

  /** Removes the transfer's entry, whatever its attempt (the transfer stopped waiting: cancelled, deleted). */
  async remove(id: Id): Promise<void> {
    await this.db.transferQueue.deleteOne({ _id: oid(id) });
  }

  /** The entry of a transfer, if it has one. */
  async get(id: Id): Promise<QueueEntry | null> {
    return this.db.transferQueue.collection.findOne<QueueEntry>({ _id: oid(id) });
  }

  /** The next `limit` entries of an account's queue after `after` (from its head without). */
  async page(accountId: Id, after: QueueCursor | null, limit: number): Promise<QueueEntry[]> {
    const filter: Record<string, unknown> = { account_id: oid(accountId) };
    if (after) filter.$or = [{ queued_at: { $gt: after.queued_at } }, { queued_at: after.queued_at, _id: { $gt: after._id } }];
    return this.db.transferQueue.find(filter).sort({ queued_at: 1, _id: 1 }).limit(limit).lean<QueueEntry[]>();
  }

  /** Every entry (the orphan sweeper's walk: it costs what the queue holds). */
  all(): Promise<QueueEntry[]> {
    return this.db.transferQueue.find({}).lean<QueueEntry[]>();
  }

  /** Accounts that have transfers waiting. */
  async accounts(): Promise<Types.ObjectId[]> {
    const rows = await this.db.transferQueue.find({}, { account_id: 1 }).lean();
    const seen = new Map(rows.map((r) => [String(r.account_id), r.account_id]));
    return [...seen.values()];
  }

  /**
   * The 1-based place of each of these waiting transfers among their account's waiting transfers
   * (`queued_at`, then `_id`): one read of the account's entries queued no later than the last of them.
   */
  async positions(accountId: Id, waiting: Array<{ _id: Types.ObjectId; queued_at: Date }>): Promise<Map<string, number>> {
    const positions = new Map<string, number>();
    if (waiting.length === 0) return positions;
    const latest = new Date(Math.max(...waiting.map((w) => w.queued_at.getTime())));
    const ahead = await this.db.transferQueue
      .find({ account_id: oid(accountId), queued_at: { $lte: latest } }, { queued_at: 1 })
      .lean();
    const before = (a: { _id: Types.ObjectId; queued_at: Date }, b: { _id: Types.ObjectId; queued_at: Date }) =>
      a.queued_at.getTime() < b.queued_at.getTime() || (a.queued_at.getTime() === b.queued_at.getTime() && String(a._id) < String(b._id));
    for (const w of waiting) positions.set(String(w._id), 1 + ahead.filter((e) => !e._id.equals(w._id) && before(e, w)).length);
    return positions;
  }

  /** Starts the entry's orphan clock (unless it runs already), or stops it (`since` null: an agent able to run it is online). */
  async setOrphanedSince(id: Id, attempt: number, since: Date | null): Promise<void> {
    await this.db.transferQueue.updateOne({ _id: oid(id), attempt, ...(since ? { orphaned_since: null } : {}) }, { $set: { orphaned_since: since } });
  }

  /** Transfers waiting, all accounts (the queue-depth metric). */
  depth(): Promise<number> {
    return this.db.transferQueue.countDocuments({});
  }
}

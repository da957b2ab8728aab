import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * One document per transfer waiting for an agent (docs/architecture.md "Queue, slots, pools and
 * failover"). Its `_id` is the transfer's, so inserting it is exact across instances even on
 * FerretDB (a unique `_id`): `execute` and a takeover make a transfer wait by inserting it, and a
 * scheduler claims it by `deleteOne({_id, attempt})`, which exactly one caller wins. The queue
 * costs what it holds: finished transfers never have an entry.
 */
const schema = new Schema(
  {
    /** The transfer's id. */
    _id: { type: Schema.Types.ObjectId, required: true },
    account_id: { type: Schema.Types.ObjectId, required: true },
    /** The transfer's `queued_at`: its place in its account's queue (oldest first, then `_id`). */
    queued_at: { type: Date, required: true },
    /** The attempt that will run: a claim names it, so a stale entry never starts a newer attempt. */
    attempt: { type: Number, required: true },
    /** The transfer's connections (they never change), to decide which agents may run it. */
    source_connection_id: { type: Schema.Types.ObjectId, required: true },
    destination_connection_id: { type: Schema.Types.ObjectId, required: true },
    /**
     * The run uses issue-25 options or applies a plan (plugins/app/transfers/options.ts `needsSync`):
     * only agents whose hello set `sync` may run it; `direct_only`: a plan's run, never relayed.
     */
    needs_sync: { type: Boolean, default: false },
    direct_only: { type: Boolean, default: false },
    /** When this entry was inserted: a transfer that has not caught up with its entry within a grace is dropped. */
    entered_at: { type: Date, required: true },
    /** Since when no agent that could run it has been online (the orphan sweeper's clock); null while one is. */
    orphaned_since: { type: Date, default: null },
    /**
     * A transfer taken over again is not started before this: a backoff growing with its takeovers
     * (TAKEOVER_BACKOFF_MS), so that an agent that looks online but is gone (its instance died
     * and its session has not gone stale yet) cannot use up XFER_JOB_MAX_TAKEOVERS in a moment.
     * Null: at once (a first takeover, an execute).
     */
    not_before: { type: Date, default: null },
  },
  { collection: 'transfer_queue', autoIndex: false, versionKey: false },
);
schema.index({ account_id: 1, queued_at: 1, _id: 1 });

export type TransferQueueDoc = InferSchemaType<typeof schema>;
export const transferQueueModel = (conn: Connection) => conn.model('TransferQueueEntry', schema);

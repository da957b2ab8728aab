import { createHash } from 'node:crypto';
import { Schema, Types, type Connection, type InferSchemaType } from 'mongoose';
import { PLAN_ACTIONS } from '@xfer/shared';

/**
 * One batch of a plan's items (`plan.items` number `seq`, plan-protocol.ts), insert-only. Its
 * `_id` is derived from (plan, seq) (`planBatchId`): a batch sent twice meets the unique `_id` and
 * is stored once, and every read is a bare `{_id: <ObjectId>}`, the one filter FerretDB hands to
 * SQLite (docs/architecture.md "FerretDB and query pushdown"), so paging a plan of a million items
 * costs a read per 1,000 of them, not a scan of every plan's items per page. The batches come in
 * path order, so (`seq`, position in `items`) is the plan's path order.
 */
const side = new Schema({ size: Number, mtime: String, checksum: String }, { _id: false });
const item = new Schema(
  { path: { type: String, required: true }, action: { type: String, enum: PLAN_ACTIONS, required: true }, reason: String, source: side, destination: side },
  { _id: false },
);
const schema = new Schema(
  {
    _id: { type: Schema.Types.ObjectId, required: true },
    plan_id: { type: Schema.Types.ObjectId, required: true },
    seq: { type: Number, required: true },
    items: { type: [item], required: true },
  },
  { collection: 'transfer_plan_batches', autoIndex: false, versionKey: false },
);
// Removing a plan's batches (a newer plan, the transfer deleted).
schema.index({ plan_id: 1 });

/** The `_id` of batch `seq` of plan `planId`: the first 12 bytes of SHA-256("<plan id>:<seq>"). */
export function planBatchId(planId: Types.ObjectId | string, seq: number): Types.ObjectId {
  return new Types.ObjectId(createHash('sha256').update(`${String(planId)}:${seq}`).digest().subarray(0, 12));
}

export type TransferPlanBatchDoc = InferSchemaType<typeof schema>;
export const transferPlanBatchModel = (conn: Connection) => conn.model('TransferPlanBatch', schema);

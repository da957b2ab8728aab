import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { PLAN_ACTIONS } from '@xfer/shared';

/**
 * One item of a plan (plan-protocol.ts PlanItem), insert-only: batch `seq` of the agent's
 * `plan.items`, position `index` in it. The batches come in path order, so (`seq`, `index`) is the
 * plan's path order, and a batch sent twice meets the unique index and is stored once.
 */
const side = new Schema({ size: Number, mtime: String, checksum: String }, { _id: false });
const schema = new Schema(
  {
    plan_id: { type: Schema.Types.ObjectId, required: true },
    transfer_id: { type: Schema.Types.ObjectId, required: true },
    seq: { type: Number, required: true },
    index: { type: Number, required: true },
    path: { type: String, required: true },
    action: { type: String, enum: PLAN_ACTIONS, required: true },
    reason: { type: String, required: true },
    source: { type: side, default: undefined },
    destination: { type: side, default: undefined },
  },
  { collection: 'transfer_plan_items', autoIndex: false, versionKey: false },
);
schema.index({ plan_id: 1, seq: 1, index: 1 }, { unique: true });
// `job.plan.query` resuming after a path it was not just given (a reconnected agent).
schema.index({ plan_id: 1, path: 1 });

export type TransferPlanItemDoc = InferSchemaType<typeof schema>;
export const transferPlanItemModel = (conn: Connection) => conn.model('TransferPlanItem', schema);

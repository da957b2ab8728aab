import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { PLAN_STATUSES } from '@xfer/shared';

/**
 * A plan of a transfer (issue 25; docs/api.md "Sync, move and plans"; plugins/app/plans/): what a
 * run would do, computed by one agent, its items in `transfer_plan_items`. Written by the request
 * that creates it and by the session of its agent (`plan.done`/`plan.failed`), one conditional
 * update each from `planning`. Items are never written here (`transfer_plan_batches`, insert-only):
 * FerretDB writes a whole document back, so a document grown per batch would cost each batch
 * everything before it.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    transfer_id: { type: Schema.Types.ObjectId, required: true },
    status: { type: String, enum: PLAN_STATUSES, required: true, default: 'planning' },
    agent_id: { type: Schema.Types.ObjectId, default: null },
    /** PlanSummary (plan-protocol.ts), once ready. */
    summary: { type: Schema.Types.Mixed, default: null },
    fingerprint: { type: String, default: null },
    error: { type: String, default: null },
    /**
     * SHA-256 of what the transfer was when planned (connections, paths, options, and when its
     * connections were last changed): an execute of the plan after any of it changed is refused.
     */
    definition: { type: String, required: true },
    /** The options planned with, as sent in `plan.assign`. */
    options: { type: Schema.Types.Mixed, required: true },
    /** When the instance holding the agent's socket sent `plan.assign` (its claim: sent once). */
    sent_at: { type: Date, default: null },
    created_at: { type: Date, required: true, default: () => new Date() },
    expires_at: { type: Date, required: true },
    completed_at: { type: Date, default: null },
  },
  { collection: 'transfer_plans', autoIndex: false, versionKey: false },
);
// The latest plan of a transfer.
schema.index({ transfer_id: 1, _id: -1 });
// Plans waiting to be sent, and those past their expiry while planning (plans.service.ts `pump`).
schema.index({ status: 1, agent_id: 1 });

export type TransferPlanDoc = InferSchemaType<typeof schema>;
export const transferPlanModel = (conn: Connection) => conn.model('TransferPlan', schema);

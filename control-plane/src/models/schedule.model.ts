import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { ownerSchema } from './automation-owner.schema.js';

/** The transfer a schedule creates on each run: `POST /transfers` fields, the paths as templates. */
const transferSchema = new Schema(
  {
    source_connection_id: { type: Schema.Types.ObjectId, required: true },
    /** A template (lib/templates.ts), rendered per run. */
    source_path: { type: String, required: true },
    destination_connection_id: { type: Schema.Types.ObjectId, required: true },
    destination_path: { type: String, required: true },
    /** Every option, defaults filled in at create. */
    options: { type: Schema.Types.Mixed, required: true },
  },
  { _id: false },
);

/**
 * A schedule of an account (scope-areas.md "Schedules"; docs/automation.md "Schedules"). The
 * firing loop (plugins/app/schedules/firing.ts) reads the active ones whose `next_run_at` has
 * come; what makes a due time fire once is the insert of its schedule run, not this document.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    name: { type: String, required: true },
    /** Five fields, checked with croner when stored. */
    cron: { type: String, required: true },
    timezone: { type: String, required: true, default: 'UTC' },
    active: { type: Boolean, required: true, default: true },
    overlap: { type: String, required: true, enum: ['skip', 'queue'], default: 'skip' },
    transfer: { type: transferSchema, default: null },
    workflow_id: { type: Schema.Types.ObjectId, default: null },
    /**
     * Whose authority it runs with (docs/security.md "Escalation rules"): the API key or user
     * that last saved it, checked again each time it fires. Null on one saved before owners were
     * recorded: it runs with the account's authority.
     */
    owner: { type: ownerSchema, default: null },
    /** The next due time; null while inactive (or when the expression has no further time). */
    next_run_at: { type: Date, default: null },
    /** The newest run (of either trigger), for `last_run_at` and `last_status`. */
    last_run_id: { type: Schema.Types.ObjectId, default: null },
    last_run_at: { type: Date, default: null },
    /** That run's `state` (schedule-run.model.ts); `started`: its status is its transfer's. */
    last_run_state: { type: String, default: null },
    /** The transfer of the newest run that made one. */
    last_transfer_id: { type: Schema.Types.ObjectId, default: null },
    /** A schedule of a workflow: the workflow run its last run started. */
    last_workflow_run_id: { type: Schema.Types.ObjectId, default: null },
    created_at: { type: Date, required: true, default: () => new Date() },
    updated_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'schedules', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ account_id: 1, _id: -1 });
schema.index({ active: 1, next_run_at: 1 });

export type ScheduleDoc = InferSchemaType<typeof schema>;
export const scheduleModel = (conn: Connection) => conn.model('Schedule', schema);

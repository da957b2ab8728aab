import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * One run of a schedule (GET /schedules/:id/runs). Inserting it is the claim of its due time:
 * the unique `{schedule_id, scheduled_for}` index is exact on FerretDB too, so of any number of
 * control-plane instances that find a due time, one inserts and runs it, and the others get a
 * duplicate-key error and leave it (docs/architecture.md "Schedules").
 */
const schema = new Schema(
  {
    schedule_id: { type: Schema.Types.ObjectId, required: true },
    account_id: { type: Schema.Types.ObjectId, required: true },
    trigger: { type: String, required: true, enum: ['schedule', 'manual'] },
    /** The due time (a manual run: the moment it was asked for). */
    scheduled_for: { type: Date, required: true },
    started_at: { type: Date, required: true, default: () => new Date() },
    transfer_id: { type: Schema.Types.ObjectId, default: null },
    workflow_run_id: { type: Schema.Types.ObjectId, default: null },
    /**
     * `starting` between the claim and the transfer's creation; then `skipped`, `failed` (no
     * transfer could be made) or `started` (the status shown is its transfer's).
     */
    state: { type: String, required: true, enum: ['starting', 'started', 'skipped', 'failed'] },
    error: { type: String, default: null },
  },
  { collection: 'schedule_runs', autoIndex: false, versionKey: false },
);
schema.index({ schedule_id: 1, scheduled_for: 1 }, { unique: true });
schema.index({ schedule_id: 1, _id: -1 });

export type ScheduleRunDoc = InferSchemaType<typeof schema>;
export const scheduleRunModel = (conn: Connection) => conn.model('ScheduleRun', schema);

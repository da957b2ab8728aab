import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * The one run in flight of a schedule with `overlap: skip`. Its `_id` is the schedule's, so
 * inserting it is an exact claim across instances (a unique `_id`, on FerretDB too): of two runs
 * that start together, one inserts it and the other is skipped. A later run that finds it frees it
 * once its transfer has ended, by `deleteOne({_id, run_id})`, which one caller wins.
 */
const schema = new Schema(
  {
    /** The schedule's id. */
    _id: { type: Schema.Types.ObjectId, required: true },
    run_id: { type: Schema.Types.ObjectId, required: true },
    /** Null while the run is creating its transfer. */
    transfer_id: { type: Schema.Types.ObjectId, default: null },
    /** A schedule of a workflow: the workflow run it started (null while starting it). */
    workflow_run_id: { type: Schema.Types.ObjectId, default: null },
    since: { type: Date, required: true },
  },
  { collection: 'schedule_inflight', autoIndex: false, versionKey: false },
);

export type ScheduleInflightDoc = InferSchemaType<typeof schema>;
export const scheduleInflightModel = (conn: Connection) => conn.model('ScheduleInflight', schema);

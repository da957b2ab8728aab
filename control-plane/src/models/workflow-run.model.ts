import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { workflowStepSchema, type WorkflowStepDoc } from './workflow.model.js';

/** One step of a run: the step as the workflow had it when the run started, and how it went. */
const runStepSchema = new Schema(
  {
    step: { type: workflowStepSchema, required: true },
    status: { type: String, required: true, enum: ['pending', 'running', 'completed', 'failed', 'skipped', 'cancelled'], default: 'pending' },
    /**
     * A transfer step's transfer. Its id is chosen and written here before the transfer is created
     * with it, so a step taken over after a crash creates the same transfer once (a second insert
     * meets the unique `_id`).
     */
    transfer_id: { type: Schema.Types.ObjectId, default: null },
    /** A notify step's outbox event, chosen the same way. */
    event_id: { type: Schema.Types.ObjectId, default: null },
    /** move_source / delete_source: what became of the files (settle-protocol.ts outcomes). */
    files: { type: Schema.Types.Mixed, default: null },
    error: { type: String, default: null },
    started_at: { type: Date, default: null },
    completed_at: { type: Date, default: null },
  },
  { _id: false },
);

/**
 * One run of a workflow (GET /workflow-runs/:id). Advanced by whichever control-plane instance
 * holds its lock (workflow-run-lock.model.ts): after it is created, when the transfer it waits
 * for ends, and by every instance's sweep (plugins/app/workflows/workflow-runs.ts).
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    workflow_id: { type: Schema.Types.ObjectId, required: true },
    workflow_name: { type: String, required: true },
    on_failure: { type: String, required: true, enum: ['stop', 'continue'] },
    status: { type: String, required: true, enum: ['queued', 'running', 'completed', 'failed', 'cancelled'], default: 'queued' },
    steps: { type: [runStepSchema], required: true },
    trigger: {
      type: new Schema({ type: { type: String, required: true, enum: ['manual', 'schedule', 'watcher'] }, id: { type: Schema.Types.ObjectId, default: null } }, { _id: false }),
      required: true,
    },
    /** The watcher's file (`{{file.*}}`); null for other triggers. */
    file: { type: new Schema({ name: String, path: String }, { _id: false }), default: null },
    /** Run parameters (`POST /workflows/:id/run {params}`): values for `{{params.NAME}}`; never returned, only their names. */
    params: { type: Schema.Types.Mixed, default: null },
    /** The instant `{{date:…}}` shows, and its zone (a schedule's due time and zone). */
    render_at: { type: Date, required: true },
    timezone: { type: String, required: true, default: 'UTC' },
    /** The transfer the run waits for (its running transfer step's), indexed: a transfer's end finds its run in one read. */
    waiting_for: { type: Schema.Types.ObjectId, default: null },
    cancel_requested: { type: Boolean, required: true, default: false },
    error: { type: String, default: null },
    created_at: { type: Date, required: true, default: () => new Date() },
    updated_at: { type: Date, required: true, default: () => new Date() },
    completed_at: { type: Date, default: null },
  },
  { collection: 'workflow_runs', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ workflow_id: 1, _id: -1 });
schema.index({ waiting_for: 1 });
// The sweep reads the runs under way (queued or running), never the history.
schema.index({ status: 1 });

export type WorkflowRunStepDoc = Omit<InferSchemaType<typeof runStepSchema>, 'step'> & { step: WorkflowStepDoc };
/** A run as read with `lean()`: its steps a plain array. */
export type WorkflowRunDoc = Omit<InferSchemaType<typeof schema>, 'steps'> & { steps: WorkflowRunStepDoc[] };
export const workflowRunModel = (conn: Connection) => conn.model('WorkflowRun', schema);

import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { COMPARE_MODES, CUTOFF_MODES, OVERWRITE_POLICIES, RUN_MODES, TRANSFER_STATUSES, VERIFY_MODES } from '@xfer/shared';

/**
 * Who looks after a running job: the instance holding its agent's socket renews `expires_at`
 * while the agent is connected; a job whose lease expired is failed by the sweeper of any instance.
 */
const lease = new Schema(
  {
    /** null until an instance holding the agent's socket claimed the job. */
    instance_id: { type: String, default: null },
    expires_at: { type: Date, required: true },
    renewed_at: { type: Date, required: true },
  },
  { _id: false },
);

/** Why an attempt ended without ending the transfer (TransferStates.interrupt). */
const interruption = new Schema(
  {
    attempt: { type: Number, required: true },
    agent_id: { type: Schema.Types.ObjectId, default: null },
    reason: { type: String, required: true },
    at: { type: Date, required: true },
  },
  { _id: false },
);

/**
 * A transfer job (api.md "Transfer job"). Every change of `status` is one conditional
 * findOneAndUpdate; agent reports apply only while the job is in progress on that agent and
 * that attempt (routes/transfers/transfer-state.ts).
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    name: { type: String, required: true },
    source_connection_id: { type: Schema.Types.ObjectId, required: true },
    source_path: { type: String, required: true },
    destination_connection_id: { type: Schema.Types.ObjectId, required: true },
    destination_path: { type: String, required: true },
    options: {
      overwrite: { type: String, enum: OVERWRITE_POLICIES, required: true },
      verify: { type: String, enum: VERIFY_MODES, required: true },
      concurrency: { type: Number, required: true },
      // Issue 25 (shared/src/protocol/agent-protocol.ts JobOptions): validated by the API schema and
      // the filter parser before they are stored; absent on transfers from before them.
      mode: { type: String, enum: RUN_MODES },
      compare: { type: String, enum: COMPARE_MODES },
      filters: { type: Schema.Types.Mixed, default: undefined },
      max_delete: { type: Schema.Types.Mixed, default: undefined },
      bandwidth_limit: { type: Number },
      max_duration: { type: Number },
      window: { type: Schema.Types.Mixed, default: undefined },
      cutoff: { type: String, enum: CUTOFF_MODES },
    },
    status: { type: String, enum: TRANSFER_STATUSES, required: true, default: 'queued' },
    /** Run number: 1, one more per retry and per takeover. */
    attempt: { type: Number, required: true, default: 1 },
    /**
     * When `execute` made the transfer wait for an agent (its place in its account's queue; a
     * takeover keeps it). `queued` with `queued_at` null: created (or retried) and not executed.
     * While it is set and the transfer is queued, `transfer_queue` holds its entry.
     */
    queued_at: { type: Date, default: null },
    /** Automatic takeovers since the last execute or retry (bounded by XFER_JOB_MAX_TAKEOVERS). */
    takeovers: { type: Number, required: true, default: 0 },
    last_interruption: { type: interruption, default: null },
    files_total: { type: Number, required: true, default: 0 },
    files_transferred: { type: Number, required: true, default: 0 },
    files_skipped: { type: Number, required: true, default: 0 },
    files_failed: { type: Number, required: true, default: 0 },
    files_deleted: { type: Number, required: true, default: 0 },
    bytes_transferred: { type: Number, required: true, default: 0 },
    started_at: { type: Date, default: null },
    completed_at: { type: Date, default: null },
    error: { type: String, default: null },
    /**
     * The plan the runs of the current execute apply (`POST /transfers/:id/execute {plan_id}`;
     * plugins/app/plans/), null for a plain run. Set by each execute, kept by takeovers.
     */
    plan_id: { type: Schema.Types.ObjectId, default: null },
    /** Set when the run stopped at the end of its window or max_duration (issue 25). */
    cutoff: { type: String, enum: ['window', 'max_duration', null], default: null },
    /**
     * The agent running the current attempt: the one agent of a direct run, the destination side
     * of a relayed one (it plans, writes and reports).
     */
    agent_id: { type: Schema.Types.ObjectId, default: null },
    /** How the current attempt runs: on one agent, or relayed between two (null while it waits). */
    mode: { type: String, enum: ['direct', 'relay', null], default: null },
    /** A relayed attempt's source side: the agent that lists and reads the source (null for direct runs). */
    source_agent_id: { type: Schema.Types.ObjectId, default: null },
    /** When `job.assign` of the current attempt went to the agent; null: still to be sent. */
    assigned_at: { type: Date, default: null },
    /** When the agent acknowledged the current attempt with `job.accepted`. */
    accepted_at: { type: Date, default: null },
    /** Cancelled while running: the instance holding the agent's socket still has to send `job.cancel`. */
    cancel_pending: { type: Boolean, required: true, default: false },
    lease: { type: lease, default: null },
    created_at: { type: Date, required: true, default: () => new Date() },
    updated_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'transfers', autoIndex: false, versionKey: false },
);
schema.index({ account_id: 1, _id: -1 });
schema.index({ account_id: 1, status: 1, _id: -1 });
schema.index({ agent_id: 1, status: 1 });
schema.index({ status: 1, 'lease.expires_at': 1 });
// The waiting transfers (queued with `queued_at`), for the sweep that finds one without its queue entry.
schema.index({ status: 1, queued_at: 1 });

export type TransferDoc = InferSchemaType<typeof schema>;
export const transferModel = (conn: Connection) => conn.model('Transfer', schema);

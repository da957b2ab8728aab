import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { TRANSFER_FILE_STATUSES } from '@xfer/shared';

/**
 * The outcome of one file in one run of a job, from the agent's `job.progress`. One document
 * per (job, attempt, path): a progress message sent twice does not count a file twice.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    job_id: { type: Schema.Types.ObjectId, required: true },
    attempt: { type: Number, required: true },
    path: { type: String, required: true },
    status: { type: String, enum: TRANSFER_FILE_STATUSES, required: true },
    size: { type: Number, required: true },
    sha256: { type: String, default: null },
    verified_by: { type: String, default: null },
    error: { type: String, default: null },
    reason: { type: String, default: null },
    created_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'transfer_files', autoIndex: false, versionKey: false },
);
// `status` is part of the key: a move reports a file `copied`, then `deleted` (issue 25). The
// index of the same prefix without it, from before, is dropped at start (models/index.ts).
schema.index({ job_id: 1, attempt: 1, path: 1, status: 1 }, { unique: true });
// The unique index also serves the resume lookup (agents/verified-lookup.ts: job_id, attempt below the
// current one, path $in the batch): job_id fixed, a few attempt values, each seeking the batch's
// paths. A `{job_id, path}` index would serve it no better and cost every insert of a file result.
schema.index({ job_id: 1, _id: -1 });

export type TransferFileDoc = InferSchemaType<typeof schema>;
export const transferFileModel = (conn: Connection) => conn.model('TransferFile', schema);

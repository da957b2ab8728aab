import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * Who advances a workflow run now: one document per run being advanced, `_id` the run's id.
 * Taking the lock is inserting it (exact on FerretDB, whose updates are read-then-write); giving
 * it back, deleting it with the holder's token; a lock past `expires_at` (its instance stopped)
 * is deleted by the next instance that finds it, naming its token, so only one takes it over.
 */
const schema = new Schema(
  {
    _id: { type: Schema.Types.ObjectId, required: true },
    token: { type: String, required: true },
    expires_at: { type: Date, required: true },
  },
  { collection: 'workflow_run_locks', autoIndex: false, versionKey: false },
);

export type WorkflowRunLockDoc = InferSchemaType<typeof schema>;
export const workflowRunLockModel = (conn: Connection) => conn.model('WorkflowRunLock', schema);

import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * An attempt of a job that ran as a relay (two agents), marked before any source byte flows
 * (relay/vouched.ts): its source files are then moved or deleted only as its source agent vouched.
 * A document of its own, inserted once and never updated, rather than a field of the transfer:
 * on FerretDB an update writes the whole transfer back, so a mark racing a progress or state write
 * could be lost, and a lost mark would let the destination's word alone delete source files.
 */
const schema = new Schema(
  {
    /** `<job id>:<attempt>`: inserting the mark twice meets the key. */
    _id: { type: String, required: true },
    account_id: { type: Schema.Types.ObjectId, required: true },
    job_id: { type: Schema.Types.ObjectId, required: true },
    attempt: { type: Number, required: true },
    created_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'relayed_attempts', autoIndex: false, versionKey: false },
);
schema.index({ job_id: 1 });

export type RelayedAttemptDoc = InferSchemaType<typeof schema>;
export const relayedAttemptModel = (conn: Connection) => conn.model('RelayedAttempt', schema);

import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * What the source agent of a relayed run vouched for (`relay.sent`, shared relay-protocol.ts): a
 * file it read whole and packed, with its size and the SHA-256 it computed while reading. One
 * document per (job, attempt, path), written by the instance hosting the relay; a source file is
 * moved or deleted only when the destination's verified result matches it (relay/vouched.ts,
 * docs/security.md "Relays").
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    job_id: { type: Schema.Types.ObjectId, required: true },
    attempt: { type: Number, required: true },
    path: { type: String, required: true },
    size: { type: Number, required: true },
    sha256: { type: String, required: true },
    created_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'relay_sent_files', autoIndex: false, versionKey: false },
);
schema.index({ job_id: 1, attempt: 1, path: 1 }, { unique: true });

export type RelaySentFileDoc = InferSchemaType<typeof schema>;
export const relaySentFileModel = (conn: Connection) => conn.model('RelaySentFile', schema);

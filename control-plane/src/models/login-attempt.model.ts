import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * One document per counted sign-in attempt, per thing it is counted against (`key`: a hashed
 * email or a client address; plugins/app/access/login-lockout.service.ts). Attempts are inserted and
 * counted, never updated: concurrent updates of one counter document are not atomic on FerretDB
 * (docs/architecture.md "FerretDB and atomic updates"), inserts and counts are.
 */
const schema = new Schema(
  {
    key: { type: String, required: true },
    at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'login_attempts', autoIndex: false, versionKey: false },
);
schema.index({ key: 1, _id: -1 });
schema.index({ at: 1 });

export type LoginAttemptDoc = InferSchemaType<typeof schema>;
export const loginAttemptModel = (conn: Connection) => conn.model('LoginAttempt', schema);

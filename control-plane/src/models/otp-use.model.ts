import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * One document per TOTP time step accepted for a user's secret: the unique index lets exactly
 * one request use a code, also when two arrive at once (plugins/app/access/mfa.service.ts). A
 * conditional update of the user would not do on FerretDB 1.24, where two of them can both win
 * (docs/architecture.md "FerretDB and atomic updates").
 */
const schema = new Schema(
  {
    user_id: { type: Schema.Types.ObjectId, required: true },
    /** The iv of the sealed secret the code belongs to: a new secret starts afresh. */
    secret_iv: { type: String, required: true },
    step: { type: Number, required: true },
    created_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'otp_uses', autoIndex: false, versionKey: false },
);
schema.index({ user_id: 1, secret_iv: 1, step: 1 }, { unique: true });

export type OtpUseDoc = InferSchemaType<typeof schema>;
export const otpUseModel = (conn: Connection) => conn.model('OtpUse', schema);

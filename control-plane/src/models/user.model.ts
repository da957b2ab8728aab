import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { ROLES } from '@xfer/shared';
import { sealedSchema } from './sealed.schema.js';

const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    /** Lower-cased; unique across the service because login is by email alone. */
    email: { type: String, required: true },
    name: { type: String, required: true },
    role: { type: String, enum: ROLES, required: true },
    password_hash: { type: String, required: true },
    /** Sign-ins before `last_uses` existed; later ones are there (last-use.model.ts). */
    last_login_at: { type: Date, default: null },
    /** Sessions issued before this instant are refused ("sign out everywhere", password change). */
    sessions_valid_after: { type: Date, required: true, default: () => new Date(0) },
    /** Sealed base32 TOTP secret of the active second factor; null while MFA is off. Never returned. */
    mfa_secret: { type: sealedSchema, default: null },
    /** Sealed base32 secret of an enrolment awaiting its first code (plugins/app/access/mfa.service.ts). */
    mfa_pending_secret: { type: sealedSchema, default: null },
    /** Last TOTP time step accepted: codes of this step or earlier are refused (no replay). */
    last_otp_step: { type: Number, required: true, default: 0 },
    created_at: { type: Date, required: true, default: () => new Date() },
    updated_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'users', autoIndex: false, versionKey: false },
);
schema.index({ email: 1 }, { unique: true });
schema.index({ account_id: 1, _id: -1 });

export type UserDoc = InferSchemaType<typeof schema>;
export const userModel = (conn: Connection) => conn.model('User', schema);

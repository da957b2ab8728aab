import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { PLANS } from '@xfer/shared';

/** A tenant: every other document carries its account_id and every query filters on it. */
const schema = new Schema(
  {
    name: { type: String, required: true },
    plan: { type: String, enum: PLANS, required: true },
    created_at: { type: Date, required: true, default: () => new Date() },
    /** When an owner last changed `plan` (PUT /settings/plan); null: as bootstrapped. */
    plan_updated_at: { type: Date, default: null },
  },
  { collection: 'accounts', autoIndex: false, versionKey: false },
);

export type AccountDoc = InferSchemaType<typeof schema>;
export const accountModel = (conn: Connection) => conn.model('Account', schema);

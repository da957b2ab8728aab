import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { sealedSchema } from './sealed.schema.js';

/**
 * Keys of the installation that every instance must share, sealed by the vault (lib/system-keys.ts). `account_id` is always `system`: sealed values
 * are bound to an account and a record (lib/sealed-fields.ts).
 */
const schema = new Schema(
  {
    _id: { type: String, required: true },
    account_id: { type: String, required: true, default: 'system' },
    key: { type: sealedSchema, required: true },
    created_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'system_keys', autoIndex: false, versionKey: false },
);

export type SystemKeyDoc = InferSchemaType<typeof schema>;
export const systemKeyModel = (conn: Connection) => conn.model('SystemKey', schema);

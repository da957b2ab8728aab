import { Schema, type Connection, type InferSchemaType } from 'mongoose';

const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    name: { type: String, required: true },
    /** SHA-256 of the full key: the key itself is never stored. Lookups go by this hash. */
    key_hash: { type: String, required: true },
    key_prefix: { type: String, required: true },
    scopes: { type: [String], required: true },
    created_by: { type: { type: String, required: true }, id: { type: String, default: null } },
    expires_at: { type: Date, default: null },
    /** Uses before `last_uses` existed; later ones are there (last-use.model.ts). */
    last_used_at: { type: Date, default: null },
    revoked_at: { type: Date, default: null },
    /** Client id of the registered service principal the key acts as (`/settings/service-principals`); null: none. */
    service_principal: { type: String, default: null },
    created_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'api_keys', autoIndex: false, versionKey: false },
);
schema.index({ key_hash: 1 }, { unique: true });
schema.index({ account_id: 1, _id: -1 });
// A principal's keys: listed, and revoked when it is removed.
schema.index({ account_id: 1, service_principal: 1, _id: -1 });

export type ApiKeyDoc = InferSchemaType<typeof schema>;
export const apiKeyModel = (conn: Connection) => conn.model('ApiKey', schema);

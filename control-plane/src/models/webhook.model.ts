import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { sealedSchema } from './sealed.schema.js';

/**
 * A webhook of an account (api.md "Webhook", decisions.md "Webhooks"). The signing secret is
 * sealed with the vault (it must be recovered to sign, so it cannot be hashed) and never returned
 * after the create response.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    /** https: URL, validated against private networks at registration and at every delivery. */
    url: { type: String, required: true },
    /** Event types subscribed to (api.md "Events"). */
    events: { type: [String], required: true },
    secret: { type: sealedSchema, required: true },
    active: { type: Boolean, required: true, default: true },
    created_at: { type: Date, required: true, default: () => new Date() },
    updated_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'webhooks', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ account_id: 1, _id: -1 });
schema.index({ account_id: 1, active: 1 });

export type WebhookDoc = InferSchemaType<typeof schema>;
export const webhookModel = (conn: Connection) => conn.model('Webhook', schema);

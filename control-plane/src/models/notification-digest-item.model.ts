import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * An event waiting for an account's hourly digest (plugins/app/notifications/digests.ts). Made by
 * the outbox fan-out instead of a notification when the account's `digest` is `hourly` (unique
 * `event_id`: made once); `digest_id` is the notification that carried it, null until then.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    event_id: { type: Schema.Types.ObjectId, required: true },
    event: { type: String, required: true },
    /** The event's time: the hour it belongs to. */
    at: { type: Date, required: true },
    data: { type: Schema.Types.Mixed, required: true },
    digest_id: { type: Schema.Types.ObjectId, default: null },
  },
  { collection: 'notification_digest_items', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ event_id: 1 }, { unique: true });
schema.index({ digest_id: 1, at: 1 });
schema.index({ account_id: 1, digest_id: 1, at: 1 });

export type NotificationDigestItemDoc = InferSchemaType<typeof schema>;
export const notificationDigestItemModel = (conn: Connection) => conn.model('NotificationDigestItem', schema);

import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { NOTIFICATION_DIGESTS } from '@xfer/shared';
import { sealedSchema } from './sealed.schema.js';

/**
 * An account's notification settings (docs/api.md "Notifications"): at most one per account
 * (unique `account_id`). The SMTP password is sealed with the vault, bound to this record
 * (lib/sealed-fields.ts `notification.smtp_password`), because it must be recovered to log in;
 * no read ever returns it (`has_password`).
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    enabled: { type: Boolean, required: true, default: false },
    recipients: { type: [String], required: true, default: [] },
    from: { type: String, default: null },
    /** Null until an SMTP server is set. */
    smtp_host: { type: String, default: null },
    smtp_port: { type: Number, default: null },
    /** true: implicit TLS; false: STARTTLS, required before any command that carries data. */
    smtp_secure: { type: Boolean, default: false },
    smtp_username: { type: String, default: null },
    smtp_password: { type: sealedSchema, default: null },
    events: { type: [String], required: true, default: [] },
    digest: { type: String, enum: NOTIFICATION_DIGESTS, required: true, default: 'none' },
    updated_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'notification_settings', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ account_id: 1 }, { unique: true });

export type NotificationSettingsDoc = InferSchemaType<typeof schema>;
export const notificationSettingsModel = (conn: Connection) => conn.model('NotificationSettings', schema);

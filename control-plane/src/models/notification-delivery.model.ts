import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { NOTIFICATION_CHANNELS, NOTIFICATION_STATUSES } from '@xfer/shared';

/**
 * One notification: one outbox event (or a test) for one account, sent as one message to all its
 * recipients (plugins/app/notifications/deliverer.service.ts). Created by the outbox fan-out; the
 * unique `event_id` makes a fan-out that runs twice (two instances, a crash before the event was
 * marked done) create it once. Subject, body and recipients are fixed when it is created, so every
 * retry sends the same message; the SMTP server and its credentials are read at each attempt (a
 * corrected password helps the retries).
 */
const deliverySchema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    /** The outbox event (a fresh id for `notification.test`, which has no outbox row). */
    event_id: { type: Schema.Types.ObjectId, required: true },
    event: { type: String, required: true },
    channel: { type: String, enum: NOTIFICATION_CHANNELS, required: true, default: 'email' },
    recipients: { type: [String], required: true },
    from: { type: String, required: true },
    subject: { type: String, required: true },
    text: { type: String, required: true },
    status: { type: String, enum: NOTIFICATION_STATUSES, required: true, default: 'pending' },
    /** Number of the last attempt claimed. */
    attempts: { type: Number, required: true, default: 0 },
    /** When the next attempt may be claimed; while one is in flight, when its lease ends. Null once final. */
    next_attempt_at: { type: Date, default: null },
    /** Start of the retry window. */
    first_attempt_at: { type: Date, default: null },
    /** The last failed attempt's reason. */
    error: { type: String, default: null },
    created_at: { type: Date, required: true, default: () => new Date() },
    sent_at: { type: Date, default: null },
  },
  { collection: 'notification_deliveries', autoIndex: false, versionKey: false, minimize: false },
);
deliverySchema.index({ event_id: 1 }, { unique: true });
deliverySchema.index({ status: 1, next_attempt_at: 1 });
deliverySchema.index({ account_id: 1, _id: -1 });
deliverySchema.index({ account_id: 1, status: 1, _id: -1 });

/**
 * Attempt `n` of a notification. Inserting it IS the claim (lib/attempt-claim.ts): the unique
 * (delivery_id, n) lets exactly one instance send attempt n, on FerretDB too.
 */
const attemptSchema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    delivery_id: { type: Schema.Types.ObjectId, required: true },
    n: { type: Number, required: true },
    instance_id: { type: String, required: true },
    started_at: { type: Date, required: true },
    lease_expires_at: { type: Date, required: true },
    finished_at: { type: Date, default: null },
    duration_ms: { type: Number, default: null },
    /** A short reason (an SMTP reply or a connection error; never a credential). */
    error: { type: String, default: null },
  },
  { collection: 'notification_delivery_attempts', autoIndex: false, versionKey: false, minimize: false },
);
attemptSchema.index({ delivery_id: 1, n: 1 }, { unique: true });

export type NotificationDeliveryDoc = InferSchemaType<typeof deliverySchema>;
export type NotificationAttemptDoc = InferSchemaType<typeof attemptSchema>;
export const notificationDeliveryModel = (conn: Connection) => conn.model('NotificationDelivery', deliverySchema);
export const notificationAttemptModel = (conn: Connection) => conn.model('NotificationAttempt', attemptSchema);

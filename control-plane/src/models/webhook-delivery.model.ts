import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { WEBHOOK_DELIVERY_STATUSES } from '@xfer/shared';

/**
 * One event for one webhook (plugins/app/webhooks/deliverer.service.ts). Created by the fan-out of an
 * outbox event; the unique index on (event_id, webhook_id) makes a fan-out that runs twice (two
 * instances, or a crash before the event was marked done) create it once. `payload` holds the
 * exact body bytes, so every retry sends, and signs, the same body.
 */
const deliverySchema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    webhook_id: { type: Schema.Types.ObjectId, required: true },
    /** The outbox event delivered (a fresh id for `webhook.test`, which has no outbox row). */
    event_id: { type: Schema.Types.ObjectId, required: true },
    event: { type: String, required: true },
    payload: { type: String, required: true },
    status: { type: String, enum: WEBHOOK_DELIVERY_STATUSES, required: true, default: 'pending' },
    /** Number of the last attempt claimed (mirrors the attempts collection, for display). */
    attempts: { type: Number, required: true, default: 0 },
    /** When the next attempt may be claimed; while one is in flight, when its lease ends. Null once final. */
    next_attempt_at: { type: Date, default: null },
    /** Start of the retry window. */
    first_attempt_at: { type: Date, default: null },
    created_at: { type: Date, required: true, default: () => new Date() },
    delivered_at: { type: Date, default: null },
  },
  { collection: 'webhook_deliveries', autoIndex: false, versionKey: false, minimize: false },
);
deliverySchema.index({ event_id: 1, webhook_id: 1 }, { unique: true });
deliverySchema.index({ status: 1, next_attempt_at: 1 });
// The retention sweeper's: finished deliveries, oldest first.
deliverySchema.index({ status: 1, _id: 1 });
deliverySchema.index({ account_id: 1, webhook_id: 1, _id: -1 });
deliverySchema.index({ account_id: 1, webhook_id: 1, status: 1, _id: -1 });

/**
 * Attempt `n` of a delivery. Inserting it IS the claim: the unique index on (delivery_id, n) lets
 * exactly one instance send attempt n, on MongoDB and on FerretDB (whose conditional updates can
 * have several winners). An attempt whose `finished_at` is still null after `lease_expires_at`
 * belonged to an instance that stopped; attempt n + 1 may then be claimed (at-least-once).
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
    status_code: { type: Number, default: null },
    duration_ms: { type: Number, default: null },
    /** A short reason (never a response body, never the secret). */
    error: { type: String, default: null },
  },
  { collection: 'webhook_delivery_attempts', autoIndex: false, versionKey: false, minimize: false },
);
attemptSchema.index({ delivery_id: 1, n: 1 }, { unique: true });

export type WebhookDeliveryDoc = InferSchemaType<typeof deliverySchema>;
export type WebhookAttemptDoc = InferSchemaType<typeof attemptSchema>;
export const webhookDeliveryModel = (conn: Connection) => conn.model('WebhookDelivery', deliverySchema);
export const webhookAttemptModel = (conn: Connection) => conn.model('WebhookAttempt', attemptSchema);

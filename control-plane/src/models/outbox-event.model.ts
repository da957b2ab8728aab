import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * Domain events waiting for delivery (ARCHITECTURE.md "Events"), written right after the change
 * that caused them. The webhook deliverer (plugins/app/webhooks/deliverer.service.ts) fans each pending
 * event out into one `webhook_deliveries` row per subscribed webhook, then marks it `done`. No
 * lease is needed: the fan-out is idempotent (unique (event_id, webhook_id) on deliveries), so
 * instances running it side by side, or again after a crash, create each delivery once.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    /** api.md "Events": `transfer.started`, `transfer.completed`, `transfer.failed`, … */
    type: { type: String, required: true },
    data: { type: Schema.Types.Mixed, required: true },
    created_at: { type: Date, required: true, default: () => new Date() },
    /** `done` once its deliveries exist. */
    status: { type: String, enum: ['pending', 'done'], required: true, default: 'pending' },
  },
  { collection: 'outbox_events', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ status: 1, _id: 1 });
schema.index({ account_id: 1, type: 1, _id: -1 });

export type OutboxEventDoc = InferSchemaType<typeof schema>;
export const outboxEventModel = (conn: Connection) => conn.model('OutboxEvent', schema);

import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * Domain events waiting for delivery (ARCHITECTURE.md "Events"), written right after the change
 * that caused them. The webhook deliverer (a later issue) claims rows by lease
 * (`lease.owner`, `lease.expires_at`, conditional on `status`) and retries with backoff
 * (`attempts`, `next_attempt_at`).
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    /** api.md "Events": `transfer.started`, `transfer.completed`, `transfer.failed`, … */
    type: { type: String, required: true },
    data: { type: Schema.Types.Mixed, required: true },
    created_at: { type: Date, required: true, default: () => new Date() },
    status: { type: String, enum: ['pending', 'done', 'failed'], required: true, default: 'pending' },
    attempts: { type: Number, required: true, default: 0 },
    next_attempt_at: { type: Date, required: true, default: () => new Date() },
    lease: {
      type: new Schema({ owner: { type: String, required: true }, expires_at: { type: Date, required: true } }, { _id: false }),
      default: null,
    },
  },
  { collection: 'outbox_events', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ status: 1, next_attempt_at: 1 });
schema.index({ account_id: 1, type: 1, _id: -1 });

export type OutboxEventDoc = InferSchemaType<typeof schema>;
export const outboxEventModel = (conn: Connection) => conn.model('OutboxEvent', schema);

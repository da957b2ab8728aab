import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * One document per request counted against a rate-limit key in a fixed window: request number
 * `slot` of that window. The unique index hands each slot to exactly one request, on MongoDB and
 * on FerretDB alike; a counter updated with `$inc` would not do on FerretDB 1.24, which applies
 * updates by reading and writing back the whole document and so loses concurrent increments.
 * Old windows are removed by a sweeper (no TTL indexes: FerretDB has none).
 */
const schema = new Schema(
  {
    key: { type: String, required: true },
    window_start: { type: Date, required: true },
    slot: { type: Number, required: true },
    expires_at: { type: Date, required: true },
  },
  { collection: 'rate_limit_slots', autoIndex: false, versionKey: false },
);
schema.index({ key: 1, window_start: 1, slot: 1 }, { unique: true });
schema.index({ expires_at: 1 });

export type RateLimitSlotDoc = InferSchemaType<typeof schema>;
export const rateLimitSlotModel = (conn: Connection) => conn.model('RateLimitSlot', schema);

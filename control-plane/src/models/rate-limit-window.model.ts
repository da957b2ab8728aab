import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * One counter per rate-limit key per fixed window, shared by every control-plane instance.
 * Old windows are removed by a sweeper (no TTL indexes: FerretDB has none).
 */
const schema = new Schema(
  {
    key: { type: String, required: true },
    window_start: { type: Date, required: true },
    count: { type: Number, required: true, default: 0 },
    expires_at: { type: Date, required: true },
  },
  { collection: 'rate_limit_windows', autoIndex: false, versionKey: false },
);
schema.index({ key: 1, window_start: 1 }, { unique: true });
schema.index({ expires_at: 1 });

export type RateLimitWindowDoc = InferSchemaType<typeof schema>;
export const rateLimitWindowModel = (conn: Connection) => conn.model('RateLimitWindow', schema);

import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * How many requests one control-plane instance admitted against a shared rate-limit key in one
 * fixed window, as of its last reconciliation (plugins/app/access/rate-limit.service.ts). Each document has a
 * single writer (the instance named in it), so overwriting `count` is safe on FerretDB 1.24 too,
 * whose updates are read-modify-write and would lose concurrent `$inc`s. Old windows are removed by
 * a sweeper (no TTL indexes: FerretDB has none).
 */
const schema = new Schema(
  {
    key: { type: String, required: true },
    window_start: { type: Date, required: true },
    instance: { type: String, required: true },
    count: { type: Number, required: true },
    expires_at: { type: Date, required: true },
  },
  { collection: 'rate_limit_counts', autoIndex: false, versionKey: false },
);
schema.index({ key: 1, window_start: 1, instance: 1 }, { unique: true });
schema.index({ expires_at: 1 });

export type RateLimitCountDoc = InferSchemaType<typeof schema>;
export const rateLimitCountModel = (conn: Connection) => conn.model('RateLimitCount', schema);

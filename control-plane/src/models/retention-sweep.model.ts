import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * One retention sweep (plugins/app/retention/): `_id` is the sweep's interval slot, so of the
 * instances whose sweepers wake in one interval, the one whose insert wins sweeps and the others
 * skip (a unique `_id`: exact on FerretDB too). A sweep that died half-way is taken up by the next
 * slot's; every step is idempotent.
 */
const schema = new Schema(
  {
    _id: { type: String, required: true },
    instance: { type: String, required: true },
    started_at: { type: Date, required: true },
  },
  { collection: 'retention_sweeps', autoIndex: false, versionKey: false },
);
schema.index({ started_at: 1 });

export type RetentionSweepDoc = InferSchemaType<typeof schema>;
export const retentionSweepModel = (conn: Connection) => conn.model('RetentionSweep', schema);

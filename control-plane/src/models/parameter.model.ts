import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { sealedSchema } from './sealed.schema.js';

/**
 * A global parameter of an account (scope-areas.md "Global parameters"): a named value that path
 * templates insert with `{{params.NAME}}`. A plain value is stored as it is; a secret one is
 * sealed with the vault bound to the record (`secret_value`, lib/sealed-fields.ts) and never
 * returned. Exactly one of `value` and `secret_value` is set.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    name: { type: String, required: true },
    secret: { type: Boolean, required: true, default: false },
    /** The plain value; null when the parameter is secret. */
    value: { type: String, default: null },
    /** The sealed value of a secret parameter (a JSON string); null when plain. */
    secret_value: { type: sealedSchema, default: null },
    description: { type: String, default: null },
    created_at: { type: Date, required: true, default: () => new Date() },
    updated_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'parameters', autoIndex: false, versionKey: false, minimize: false },
);
// Names are unique per account; the unique index also serves lookups by name (templates).
schema.index({ account_id: 1, name: 1 }, { unique: true });
schema.index({ account_id: 1, _id: -1 });

export type ParameterDoc = InferSchemaType<typeof schema>;
export const parameterModel = (conn: Connection) => conn.model('Parameter', schema);

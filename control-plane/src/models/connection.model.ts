import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { CONNECTION_TYPES } from '@xfer/shared';
import { sealedSchema } from './sealed.schema.js';

/** A storage endpoint of an account (decisions.md "Connections"). */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    name: { type: String, required: true },
    type: { type: String, enum: CONNECTION_TYPES, required: true },
    host: { type: String, default: null },
    /** null: the type's default port, so a change of type moves it along. */
    port: { type: Number, default: null },
    path: { type: String, required: true, default: '/' },
    options: { type: Schema.Types.Mixed, required: true, default: () => ({}) },
    /** Sealed JSON object of the credential fields; null when none are stored (nfs). Never returned. */
    credentials: { type: sealedSchema, default: null },
    /** The one agent that serves the connection; exclusive with `agent_pool`. */
    agent_id: { type: Schema.Types.ObjectId, default: null },
    /** The pool (agent label) whose agents serve the connection; null with `agent_id` null: any agent of the account. */
    agent_pool: { type: String, default: null },
    /** Bumped by every update, so an update applies only to the version it validated. */
    revision: { type: Number, required: true, default: 0 },
    created_at: { type: Date, required: true, default: () => new Date() },
    updated_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'connections', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ account_id: 1, name: 1 }, { unique: true });
schema.index({ account_id: 1, _id: -1 });
schema.index({ account_id: 1, type: 1, _id: -1 });

export type ConnectionDoc = InferSchemaType<typeof schema>;
export const connectionModel = (conn: Connection) => conn.model('Connection', schema);

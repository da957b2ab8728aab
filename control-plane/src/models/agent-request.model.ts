import { Schema, type Connection, type InferSchemaType } from 'mongoose';

export const AGENT_REQUEST_KINDS = ['ping', 'connection.test', 'source.settle'] as const;
export type AgentRequestKind = (typeof AGENT_REQUEST_KINDS)[number];

/**
 * A request for an agent (ping, connection test, settling source files) made on any control-plane instance and carried
 * out by the instance holding the agent's socket: it claims the row (`pending` → `sent`),
 * decrypts the connection itself when it sends (no credentials are ever stored here) and writes
 * the agent's answer (`done`). Rows past `expires_at` are removed by a sweeper.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    agent_id: { type: Schema.Types.ObjectId, required: true },
    kind: { type: String, enum: AGENT_REQUEST_KINDS, required: true },
    connection_id: { type: Schema.Types.ObjectId, default: null },
    /** `source.settle`: what to do (`action`, `source_path`, `to`, `files`: paths and sizes, no credentials). */
    body: { type: Schema.Types.Mixed, default: null },
    status: { type: String, enum: ['pending', 'sent', 'done'], required: true, default: 'pending' },
    instance_id: { type: String, default: null },
    result: {
      type: new Schema({ success: Boolean, message: String, latency_ms: Number }, { _id: false }),
      default: null,
    },
    /** `source.settle`: the agent's answer (`results`, or `error` for the request as a whole). */
    settled: { type: Schema.Types.Mixed, default: null },
    created_at: { type: Date, required: true, default: () => new Date() },
    expires_at: { type: Date, required: true },
  },
  { collection: 'agent_requests', autoIndex: false, versionKey: false },
);
schema.index({ agent_id: 1, status: 1 });
schema.index({ expires_at: 1 });

export type AgentRequestDoc = InferSchemaType<typeof schema>;
export const agentRequestModel = (conn: Connection) => conn.model('AgentRequest', schema);

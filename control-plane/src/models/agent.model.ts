import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * The open WebSocket session of an agent, written by the control-plane instance holding the
 * socket and refreshed by it every few seconds, so that any instance can tell whether the agent
 * is online (session present and `last_seen_at` fresh) and the holder can tell when another
 * instance took the agent over (`session_id` changed) or it was revoked (document gone).
 */
const session = new Schema(
  {
    instance_id: { type: String, required: true },
    /** Where other instances reach the holder (`XFER_INSTANCE_URL`): a relay's host links to it for this agent's side. */
    instance_url: { type: String, default: null },
    /** Unique per socket: a newer session of the same agent replaces it. */
    session_id: { type: String, required: true },
    connected_at: { type: Date, required: true },
    last_seen_at: { type: Date, required: true },
  },
  { _id: false },
);

/** A managed agent (decisions.md "Agents"). Revoking deletes the document: its token stops working at once. */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    name: { type: String, required: true },
    labels: { type: [String], required: true, default: () => [] },
    /** SHA-256 of the full `agt_` token: the token itself is never stored. Lookups go by this hash. */
    token_hash: { type: String, required: true },
    /** First characters of the token, for audit records and support (not a secret). */
    token_prefix: { type: String, required: true },
    created_by: { type: { type: String, required: true }, id: { type: String, default: null } },
    /**
     * Approved by an administrator (docs/security.md "Agents: approval"): only then does it serve
     * connections not pinned to it. No default on purpose: an agent stored before approval existed
     * has no field and counts as approved (eligibility.ts `isApproved`).
     */
    approved: { type: Boolean },
    approved_at: { type: Date, default: null },
    approved_by: { type: { type: String }, id: { type: String, default: null } },
    /** From the last `hello`. */
    version: { type: String, default: null },
    hostname: { type: String, default: null },
    connector_types: { type: [String], required: true, default: () => [] },
    /** The agent's own limit of jobs at once (`--max-jobs`). */
    max_jobs: { type: Number, default: null },
    /** Labels the agent's operator gave it (`--label`): pools it belongs to besides `labels`. */
    agent_labels: { type: [String], required: true, default: () => [] },
    /** The agent can play either side of a relay (`hello.relay`). */
    relay: { type: Boolean, required: true, default: false },
    /** The agent polls watchers (`hello.watch`). */
    watch: { type: Boolean, required: true, default: false },
    /** The agent moves and deletes verified source files for workflows (`hello.settle`). */
    settle: { type: Boolean, required: true, default: false },
    /** The agent runs the issue-25 options and computes plans (`hello.sync`): only then is it sent such jobs and plans. */
    sync: { type: Boolean, required: true, default: false },
    /** The account's limit of jobs at once (`PUT /agents/:id {max_jobs}`), bounded by `max_jobs`; null: none. */
    job_limit: { type: Number, default: null },
    /** Last time the agent was heard from; kept after it disconnects. */
    last_seen_at: { type: Date, default: null },
    session: { type: session, default: null },
    created_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'agents', autoIndex: false, versionKey: false },
);
schema.index({ token_hash: 1 }, { unique: true });
schema.index({ account_id: 1, name: 1 }, { unique: true });
schema.index({ account_id: 1, _id: -1 });

export type AgentDoc = InferSchemaType<typeof schema>;
export const agentModel = (conn: Connection) => conn.model('Agent', schema);

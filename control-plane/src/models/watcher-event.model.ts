import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * One file version a watcher saw (GET /watchers/:id/events). Inserting it is the claim of its
 * action: the unique `{watcher_id, path, version}` index is exact on FerretDB too, so of any
 * number of reports of one version (an agent re-sending after a reconnect, two agents during a
 * hand-over, several control-plane instances) one inserts it and starts its action; the others
 * get a duplicate-key error and leave it (docs/architecture.md "Watchers"). The transfer it
 * starts has the event's `_id` as its own, so a start repeated after a crash finds it instead of
 * creating a second one.
 */
const schema = new Schema(
  {
    watcher_id: { type: Schema.Types.ObjectId, required: true },
    account_id: { type: Schema.Types.ObjectId, required: true },
    /** Relative to the connection's base path. */
    path: { type: String, required: true },
    /** `etag:…` or `size:…:mtime:…` (docs/agent.md "Watching a folder"). */
    version: { type: String, required: true },
    size: { type: Number, required: true },
    modified_at: { type: Date, default: null },
    /** The agent that reported it. */
    agent_id: { type: Schema.Types.ObjectId, required: true },
    seen_at: { type: Date, required: true, default: () => new Date() },
    /**
     * `pending` between the claim and the action's start (a sweep starts the ones an instance
     * left); `started` (the status shown is its transfer's); `failed` (no transfer could be made).
     */
    state: { type: String, required: true, enum: ['pending', 'started', 'failed'] },
    transfer_id: { type: Schema.Types.ObjectId, default: null },
    workflow_run_id: { type: Schema.Types.ObjectId, default: null },
    error: { type: String, default: null },
  },
  { collection: 'watcher_events', autoIndex: false, versionKey: false },
);
schema.index({ watcher_id: 1, path: 1, version: 1 }, { unique: true });
schema.index({ watcher_id: 1, _id: -1 });
schema.index({ state: 1, seen_at: 1 });

export type WatcherEventDoc = InferSchemaType<typeof schema>;
export const watcherEventModel = (conn: Connection) => conn.model('WatcherEvent', schema);

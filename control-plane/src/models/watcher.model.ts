import { Schema, type Connection, type InferSchemaType } from 'mongoose';
import { ownerSchema } from './automation-owner.schema.js';

/** The transfer a watcher creates for each new file version: from its connection to this destination. */
const transferSchema = new Schema(
  {
    destination_connection_id: { type: Schema.Types.ObjectId, required: true },
    /** A template (lib/templates.ts), rendered per file version (`{{file.*}}`, `{{run.id}}`…). */
    destination_path: { type: String, required: true },
    /** Every option, defaults filled in at create. */
    options: { type: Schema.Types.Mixed, required: true },
  },
  { _id: false },
);

/**
 * A folder watcher of an account (scope-areas.md "Watchers"; docs/automation.md "Watchers"). The
 * agent that polls it is chosen by plugins/app/watchers/assignments.ts and told with `watch.set`
 * (shared/src/protocol/watch-protocol.ts); what makes a file version act once is the insert of
 * its watcher event (watcher-event.model.ts), not this document.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    name: { type: String, required: true },
    connection_id: { type: Schema.Types.ObjectId, required: true },
    /** The folder, relative to the connection's base path. */
    path: { type: String, required: true },
    /** A glob on the file name (shared/src/name-pattern.ts). */
    pattern: { type: String, required: true, default: '*' },
    recursive: { type: Boolean, required: true, default: false },
    poll_interval_seconds: { type: Number, required: true },
    stable_seconds: { type: Number, required: true },
    include_existing: { type: Boolean, required: true, default: false },
    active: { type: Boolean, required: true, default: true },
    transfer: { type: transferSchema, default: null },
    workflow_id: { type: Schema.Types.ObjectId, default: null },
    /**
     * Whose authority it runs with (docs/security.md "Escalation rules"): the API key or user
     * that last saved it, checked again each time it fires. Null on one saved before owners were
     * recorded: it runs with the account's authority.
     */
    owner: { type: ownerSchema, default: null },
    /**
     * Grows with every change of what is watched (connection, path, pattern, recursive,
     * stable_seconds, include_existing): an agent holding an older revision starts over.
     */
    revision: { type: Number, required: true, default: 1 },
    /** The agent polling it now; null while no agent that may is online (or it is inactive). */
    agent_id: { type: Schema.Types.ObjectId, default: null },
    /** When the last poll without error started (the control plane's clock); the baseline of the next agent's first listing. */
    last_poll_at: { type: Date, default: null },
    /** Why the last poll failed; null after one that did not. */
    last_error: { type: String, default: null },
    created_at: { type: Date, required: true, default: () => new Date() },
    updated_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'watchers', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ account_id: 1, _id: -1 });
schema.index({ agent_id: 1 });
schema.index({ active: 1 });

export type WatcherDoc = InferSchemaType<typeof schema>;
export const watcherModel = (conn: Connection) => conn.model('Watcher', schema);

import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * One running control-plane instance, as it last reported itself (plugins/app/instances.ts): one
 * small write per instance per XFER_INSTANCE_HEARTBEAT_MS, and one when its active master key
 * changes. `xfer-server rotate-keys --drop-retired` reads them: a retired key is not dropped while
 * a live instance (`live_until` ahead) still seals under it (docs/security.md "Key rotation"). A
 * record past `live_until` is stale (the instance died without saying goodbye) and is ignored.
 */
const schema = new Schema(
  {
    /** The instance id (`host:pid:random`), as in agent sessions and leases. */
    _id: { type: String, required: true },
    /** Key id of the master key it seals under (lib/vault.ts keyId). */
    active_kid: { type: String, required: true },
    /** `files` (master.key of its data dir, followed while running) or `env` (XFER_MASTER_KEY: changes by restart). */
    key_source: { type: String, enum: ['files', 'env'], required: true },
    started_at: { type: Date, required: true },
    seen_at: { type: Date, required: true },
    /** seen_at + 3 heartbeat intervals: afterwards the record no longer counts. */
    live_until: { type: Date, required: true },
    /**
     * The key it sealed under before its last switch, and when it switched: a value it sealed
     * under that key just before may still be on its way to the database (lib/key-rotation.ts
     * IN_FLIGHT_MS), so a drop waits that long after a switch before it counts the values.
     */
    switched_from: { type: String, default: null },
    switched_at: { type: Date, default: null },
  },
  { collection: 'instances', autoIndex: false, versionKey: false },
);
schema.index({ live_until: 1 });

export type InstanceDoc = InferSchemaType<typeof schema>;
export const instanceModel = (conn: Connection) => conn.model('Instance', schema);

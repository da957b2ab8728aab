import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * The audit trail. Append-only: the application only ever inserts (lib/audit-chain.ts
 * `appendToChain`) and reads; the hooks below make any attempt to change or delete a record
 * through mongoose fail loudly, and the hash chain makes one done behind its back visible.
 */
const schema = new Schema(
  {
    timestamp: { type: Date, required: true, default: () => new Date() },
    account_id: { type: Schema.Types.ObjectId, default: null },
    actor: { type: { type: String, required: true }, id: { type: String, default: null } },
    action: { type: String, required: true },
    resource: { type: { type: String }, id: { type: String, default: null } },
    ip: { type: String, default: null },
    outcome: { type: String, enum: ['success', 'failure', 'denied'], required: true },
    details: { type: Schema.Types.Mixed, default: undefined },
    /** The account id, or `system` (lib/audit-chain.ts). */
    chain: { type: String },
    seq: { type: Number },
    prev_hash: { type: String },
    hash: { type: String },
  },
  { collection: 'audit_events', autoIndex: false, versionKey: false },
);
// Claims a record's place in its chain: two writers cannot both take one number.
schema.index({ chain: 1, seq: 1 }, { unique: true });
// A chain's checkpoints (`audit.expire` records, lib/audit-chain.ts `expiredThrough`).
schema.index({ chain: 1, action: 1 });
schema.index({ account_id: 1, _id: -1 });
schema.index({ account_id: 1, action: 1, _id: -1 });
schema.index({ account_id: 1, 'actor.id': 1, _id: -1 });
schema.index({ account_id: 1, 'resource.id': 1, _id: -1 });

const refuse = () => {
  throw new Error('audit_events is append-only');
};
for (const op of ['updateOne', 'updateMany', 'findOneAndUpdate', 'replaceOne', 'deleteOne', 'deleteMany', 'findOneAndDelete'] as const) {
  schema.pre(op, refuse);
}

export type AuditEventDoc = InferSchemaType<typeof schema>;
export const auditEventModel = (conn: Connection) => conn.model('AuditEvent', schema);

import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * The audit trail. Append-only: the application only ever inserts and reads; the hooks below
 * make any attempt to change or delete a record through mongoose fail loudly.
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
  },
  { collection: 'audit_events', autoIndex: false, versionKey: false },
);
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

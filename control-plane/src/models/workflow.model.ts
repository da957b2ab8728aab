import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/**
 * One step of a workflow, as stored: `type` and the fields of that type (the service checks which
 * fields each type takes). Connection ids are ObjectIds; paths and `to` are templates
 * (lib/templates.ts), rendered when the step runs.
 */
export const workflowStepSchema = new Schema(
  {
    type: { type: String, required: true, enum: ['transfer', 'move_source', 'delete_source', 'notify'] },
    source_connection_id: { type: Schema.Types.ObjectId, default: undefined },
    source_path: { type: String, default: undefined },
    destination_connection_id: { type: Schema.Types.ObjectId, default: undefined },
    destination_path: { type: String, default: undefined },
    /** A transfer step's options, defaults filled in at create. */
    options: { type: Schema.Types.Mixed, default: undefined },
    /** move_source: the folder the files go under (a template). */
    to: { type: String, default: undefined },
    channel: { type: String, default: undefined },
    subject: { type: String, default: undefined },
  },
  { _id: false },
);

/**
 * A workflow of an account (scope-areas.md "Workflows"; docs/automation.md "Workflows"): ordered
 * steps run by plugins/app/workflows/workflow-runs.ts. A run copies the steps when it starts, so a
 * change here never changes a run under way.
 */
const schema = new Schema(
  {
    account_id: { type: Schema.Types.ObjectId, required: true },
    name: { type: String, required: true },
    steps: { type: [workflowStepSchema], required: true },
    on_failure: { type: String, required: true, enum: ['stop', 'continue'], default: 'stop' },
    created_at: { type: Date, required: true, default: () => new Date() },
    updated_at: { type: Date, required: true, default: () => new Date() },
  },
  { collection: 'workflows', autoIndex: false, versionKey: false, minimize: false },
);
schema.index({ account_id: 1, _id: -1 });

export type WorkflowStepDoc = InferSchemaType<typeof workflowStepSchema>;
/** A workflow as read with `lean()`: its steps a plain array. */
export type WorkflowDoc = Omit<InferSchemaType<typeof schema>, 'steps'> & { steps: WorkflowStepDoc[] };
export const workflowModel = (conn: Connection) => conn.model('Workflow', schema);

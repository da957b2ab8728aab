import { Schema, type Connection, type InferSchemaType } from 'mongoose';

/** What a slot is held for: the agent running an attempt (direct, or a relay's destination side), or a relay's source side. */
export const SLOT_ROLES = ['run', 'source'] as const;
export type SlotRole = (typeof SLOT_ROLES)[number];

/**
 * A job slot held on an agent (docs/architecture.md "Queue, slots, pools and failover"). Slots are
 * claimed by inserting, never by counting: `{agent_id, slot}` is unique and `slot` is below the
 * agent's effective limit, so an agent never holds more slots than its limit, and `{job_id,
 * attempt, role}` is unique, so the insert of an attempt's `run` slot also claims the attempt
 * (exact on FerretDB, which applies conditional updates as read-then-write-back). Released at
 * every end of the run; stale ones are swept.
 */
const schema = new Schema(
  {
    agent_id: { type: Schema.Types.ObjectId, required: true },
    /** 0 … effective limit − 1. */
    slot: { type: Number, required: true },
    account_id: { type: Schema.Types.ObjectId, required: true },
    job_id: { type: Schema.Types.ObjectId, required: true },
    attempt: { type: Number, required: true },
    role: { type: String, enum: SLOT_ROLES, required: true },
    /** The instance that claimed it (for logs and support). */
    instance_id: { type: String, required: true },
    claimed_at: { type: Date, required: true },
  },
  { collection: 'agent_slots', autoIndex: false, versionKey: false },
);
schema.index({ agent_id: 1, slot: 1 }, { unique: true });
schema.index({ job_id: 1, attempt: 1, role: 1 }, { unique: true });

export type AgentSlotDoc = InferSchemaType<typeof schema>;
export const agentSlotModel = (conn: Connection) => conn.model('AgentSlot', schema);

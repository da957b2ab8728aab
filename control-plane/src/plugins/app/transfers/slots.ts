import { Types } from 'mongoose';
import type { Models } from '../../../models/index.js';
import type { AgentSlotDoc, SlotRole } from '../../../models/agent-slot.model.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';

export type { SlotRole } from '../../../models/agent-slot.model.js';
export type HeldSlot = AgentSlotDoc & { _id: Types.ObjectId };
type Id = string | Types.ObjectId;

const oid = (id: Id) => (typeof id === 'string' ? new Types.ObjectId(id) : id);

/** A claim of one slot on one agent for one side of one attempt. */
export interface SlotClaim {
  agentId: Id;
  accountId: Id;
  /** The agent's effective limit now (AgentsService / eligibility.ts `effectiveSlots`). */
  limit: number;
  jobId: Id;
  attempt: number;
  role: SlotRole;
  instanceId: string;
}

/**
 * `claimed`; `full` (no slot number below the limit is free, or the agent holds its limit
 * already); `taken` (this side of this attempt holds a slot already: someone else started it).
 */
export type SlotOutcome = 'claimed' | 'full' | 'taken';

/** How often a claim tries again when another instance took the slot number it chose. */
const CLAIM_TRIES = 4;

/**
 * The job slots of agents (`agent_slots`, models/agent-slot.model.ts): claimed by inserting into
 * two unique indexes, released by deleting. What an agent runs at once is what it holds here.
 */
export class AgentSlots {
  constructor(private readonly db: Models) {}

  /** The slots each of these agents holds now. */
  async held(agentIds: Id[]): Promise<Map<string, HeldSlot[]>> {
    const held = new Map<string, HeldSlot[]>(agentIds.map((id) => [String(id), []]));
    if (agentIds.length === 0) return held;
    const docs = await this.db.agentSlots.find({ agent_id: { $in: agentIds.map(oid) } }).lean<HeldSlot[]>();
    for (const d of docs) held.get(String(d.agent_id))?.push(d);
    return held;
  }

  /**
   * Claims the lowest free slot number below `limit`, unless the agent holds `limit` slots already
   * (a lowered limit lets the runs above it finish before anything new starts). Exact across
   * instances: two claims of one slot number, or of one side of one attempt, meet a unique index.
   */
  async claim(c: SlotClaim): Promise<SlotOutcome> {
    for (let i = 0; i < CLAIM_TRIES; i++) {
      const held = await this.db.agentSlots.find({ agent_id: oid(c.agentId) }, { slot: 1 }).lean();
      if (held.length >= c.limit) return 'full';
      const used = new Set(held.map((h) => h.slot));
      let slot = 0;
      while (used.has(slot)) slot++;
      if (slot >= c.limit) return 'full';
      try {
        await this.db.agentSlots.collection.insertOne({
          agent_id: oid(c.agentId), slot, account_id: oid(c.accountId), job_id: oid(c.jobId), attempt: c.attempt, role: c.role,
          instance_id: c.instanceId, claimed_at: new Date(),
        });
        return 'claimed';
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        // Which index refused it: this side of the attempt is held (someone started it), or the number was taken meanwhile.
        if (await this.db.agentSlots.exists({ job_id: oid(c.jobId), attempt: c.attempt, role: c.role })) return 'taken';
      }
    }
    return 'full';
  }

  /** Releases the slots of a run: of attempt `attempt`, or of every attempt of the job when omitted. */
  async release(jobId: Id, attempt?: number): Promise<void> {
    await this.db.agentSlots.deleteMany({ job_id: oid(jobId), ...(attempt === undefined ? {} : { attempt }) });
  }

  /**
   * Sweeps slots claimed before `claimedBefore` whose run is over (`isLive` false): left by an
   * instance that died between a claim and the start, or by a release that failed. Costs what the
   * fleet runs, never the history. Returns how many it released.
   */
  async sweep(claimedBefore: Date, isLive: (slots: HeldSlot[]) => Promise<Set<string>>): Promise<number> {
    const old = await this.db.agentSlots.find({ claimed_at: { $lt: claimedBefore } }).lean<HeldSlot[]>();
    if (old.length === 0) return 0;
    const live = await isLive(old);
    const stale = old.filter((s) => !live.has(String(s._id)));
    if (stale.length === 0) return 0;
    const res = await this.db.agentSlots.deleteMany({ _id: { $in: stale.map((s) => s._id) }, claimed_at: { $lt: claimedBefore } });
    return res.deletedCount;
  }
}

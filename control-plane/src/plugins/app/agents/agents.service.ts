import { randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import type { Actor, CreateAgentRequest, ListAgentsQuery, Page, UpdateAgentRequest } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { AgentDoc } from '../../../models/agent.model.js';
import { ConflictError, NotFoundError, ServiceUnavailableError } from '../../../errors.js';
import { sha256Hex } from '../../../lib/crypto.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import type { AgentSlots, RunConnection } from '../transfers/index.js';
import { onlineWindowMs, type AgentHub } from './hub.js';
import { chooseFor, chooseRun, isApproved, SERVES, type AgentFacts, type RunNeeds } from './eligibility.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';

export type StoredAgent = AgentDoc & { _id: Types.ObjectId };
type AccountId = string | Types.ObjectId;

export const agentNotFound = (id: string) => new NotFoundError(`Agent ${id} not found`);
const duplicateName = (name: string) => new ConflictError(`An agent named '${name}' already exists`);

/** `agt_` + 32 random bytes base64url (43 characters). */
function newToken(): string {
  return `agt_${randomBytes(32).toString('base64url')}`;
}

/** What AgentsService needs. */
export interface AgentsServiceOptions {
  db: Models;
  /** Every write to an agent document goes through the hub, in turn (AgentHub.writeAgent). */
  hub: AgentHub;
  /** Decides how fresh a session must be to count as online (`onlineWindowMs`). */
  dispatchPollMs: number;
  /** The job slots agents hold (the transfers domain's), for an agent's load. */
  slots: Pick<AgentSlots, 'held'>;
}

/** What changed in a `PUT /agents/:id`, for its audit record: each field's value before and after. */
export type AgentChanges = Partial<Record<'name' | 'labels' | 'max_jobs', { from: unknown; to: unknown }>>;

/** An agent's load, for its reads: the transfers it runs (either side of a relay) and the slots it holds. */
export interface AgentLoad {
  running: string[];
  slotsHeld: number;
}

/** Fields the choice of agents reads: never the token hash. */
const FACTS = { ...SERVES, name: 1, relay: 1, watch: 1, settle: 1, sync: 1, max_jobs: 1, job_limit: 1, session: 1 } as const;
const sameList = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((v, i) => v === b[i]);

/**
 * The agent registry (decisions.md "Agents"): agents of an account, their tokens (stored as
 * SHA-256 only), their pools and limits, who is online, and which agents could run some work
 * (eligibility.ts; the scheduler, scheduler.ts, starts transfers on them).
 */
export class AgentsService {
  constructor(private readonly o: AgentsServiceOptions) {}

  /** Online: a session is registered and its holder refreshed it within the window. */
  isOnline(doc: Pick<AgentDoc, 'session'>, now = Date.now()): boolean {
    return !!doc.session && now - doc.session.last_seen_at.getTime() < onlineWindowMs(this.o.dispatchPollMs);
  }

  /**
   * Deletes the agent, so its token stops working (revoking); false when it was gone already. Its
   * socket and running jobs are the caller's next steps (routes/agents `DELETE /agents/:id`).
   */
  async remove(doc: StoredAgent): Promise<boolean> {
    const removed = await this.o.hub.writeAgent(String(doc._id), () => this.o.db.agents.findOneAndDelete({ _id: doc._id, account_id: doc.account_id }).lean());
    return removed !== null;
  }

  /** The in-progress transfers each agent runs (its own or a relay's source side), and the slots it holds. */
  async loadOf(agentIds: Types.ObjectId[]): Promise<Map<string, AgentLoad>> {
    const { db } = this.o;
    const load = new Map<string, AgentLoad>(agentIds.map((id) => [String(id), { running: [], slotsHeld: 0 }]));
    if (agentIds.length === 0) return load;
    const jobs = await db.transfers.find(
      { status: 'in-progress', $or: [{ agent_id: { $in: agentIds } }, { source_agent_id: { $in: agentIds } }] }, { agent_id: 1, source_agent_id: 1 },
    ).sort({ _id: -1 }).lean();
    for (const job of jobs) {
      for (const side of [job.agent_id, job.source_agent_id]) if (side) load.get(String(side))?.running.push(String(job._id));
    }
    for (const [id, held] of await this.o.slots.held(agentIds)) load.get(id)!.slotsHeld = held.length;
    return load;
  }

  /** The account's agents as the choice of agents sees them, online or not. */
  async factsOf(accountId: AccountId): Promise<AgentFacts[]> {
    const docs = await this.o.db.agents.find({ account_id: accountId }, FACTS).lean();
    const now = Date.now();
    // A session registered on this instance whose socket is no longer open here has closed (its
    // registration is being cleared): offline, however fresh it looks. A relay side chosen there
    // would be lost at once.
    const closedHere = (d: (typeof docs)[number]) => d.session?.instance_id === this.o.hub.instanceId && !this.o.hub.get(String(d._id));
    return docs.map((d) => ({ ...d, online: this.isOnline(d, now) && !closedHere(d) } as AgentFacts));
  }

  /**
   * Checks that the account's online agents could run a transfer between these connections now,
   * directly or relayed (`relays`: this control plane relays); throws the 503 (or 409) saying why
   * not (eligibility.ts `chooseRun`). Whether a slot is free does not matter: the transfer waits.
   */
  async assertRunnable(accountId: AccountId, [source, destination]: [RunConnection, RunConnection], relays: boolean, needs: RunNeeds = {}): Promise<void> {
    const choice = chooseRun(source, destination, await this.factsOf(accountId), relays, needs);
    if (choice.mode === null) throw choice.problem;
  }

  /** The account's agents, newest first, one page. */
  list(accountId: AccountId, query: ListAgentsQuery): Promise<Page<StoredAgent>> {
    return paginate(this.o.db.agents, { account_id: accountId }, query, (doc) => doc as StoredAgent);
  }

  /** The caller's agent, or 404 for unknown, malformed and other accounts' ids alike. */
  async find(accountId: AccountId, id: string): Promise<StoredAgent> {
    const { db } = this.o;
    const _id = toObjectId(id);
    const doc = _id && await db.agents.findOne({ _id, account_id: accountId }).lean();
    if (!doc) throw agentNotFound(id);
    return doc as StoredAgent;
  }

  /**
   * Creates an agent and returns its token, the only time it exists outside the agent's hands.
   * `approved` when an administrator creates it (docs/security.md "Agents: approval"); pending
   * otherwise. `beforeWrite` is called with what the audit record names, after the checks and
   * right before the write (plugins/app/access/audit.service.ts `change`).
   */
  async create(
    accountId: AccountId, input: CreateAgentRequest, createdBy: Actor, approved: boolean,
    beforeWrite: (id: string, details: { name: string; labels: string[]; token_prefix: string; approved: boolean }) => Promise<void> = async () => {},
  ): Promise<{ doc: StoredAgent; token: string }> {
    const { db } = this.o;
    const name = input.name.trim();
    if (await db.agents.exists({ account_id: accountId, name })) throw duplicateName(name);
    const token = newToken();
    const _id = new Types.ObjectId();
    await beforeWrite(String(_id), { name, labels: input.labels ?? [], token_prefix: `${token.slice(0, 12)}...`, approved });
    try {
      const doc = await db.agents.create({
        _id,
        account_id: accountId,
        name,
        labels: input.labels ?? [],
        token_hash: sha256Hex(token),
        token_prefix: `${token.slice(0, 12)}...`,
        created_by: createdBy,
        approved,
        ...(approved ? { approved_at: new Date(), approved_by: createdBy } : {}),
      });
      return { doc: doc.toObject() as StoredAgent, token };
    } catch (err) {
      if (isDuplicateKey(err)) throw duplicateName(name);
      throw err;
    }
  }

  /** The agent holding this token, or null (unknown or revoked: revoking deletes the agent). */
  async byToken(token: string): Promise<StoredAgent | null> {
    if (!/^agt_[A-Za-z0-9_-]{20,200}$/.test(token)) return null;
    return (await this.o.db.agents.findOne({ token_hash: sha256Hex(token) }).lean()) as StoredAgent | null;
  }

  /**
   * The agent that runs a connection's test, or settles its source files (`needs: 'settle'`): an
   * online agent serving it (eligibility.ts `serves`: the agent it names, or one of its pool, or
   * any with the connector), the one holding the fewest slots; 503 naming the connection when none is online.
   */
  async choose(accountId: AccountId, connection: RunConnection, needs?: 'settle'): Promise<StoredAgent> {
    let eligible = chooseFor(connection, await this.factsOf(accountId));
    if (!Array.isArray(eligible)) throw eligible;
    if (needs === 'settle') {
      eligible = eligible.filter((a) => a.settle);
      if (eligible.length === 0) {
        throw new ServiceUnavailableError(`No online agent serving connection '${connection.name}' can move or delete source files (an older agent version: upgrade it)`);
      }
    }
    const load = await this.loadOf(eligible.map((a) => a._id));
    const held = (a: AgentFacts) => load.get(String(a._id))!.slotsHeld;
    const best = eligible.reduce((b, a) => (held(a) < held(b) ? a : b));
    return this.find(accountId, String(best._id));
  }

  /**
   * Changes the given fields of the account's agent (`PUT /agents/:id`): `name` (409 when taken),
   * `labels` (the account's; the agent's own `--label`s stay), `max_jobs` (stored as `job_limit`;
   * null removes it). Changing `labels` or `max_jobs` of an approved agent decides which shared
   * connections it serves and how much work it wins: `mayChangeServing` is called with those
   * fields first, and throws when the caller may not (docs/security.md "Agents: approval").
   * `beforeWrite` gets what changed, for the audit record, right before the write.
   */
  async update(
    accountId: AccountId, id: string, input: UpdateAgentRequest, mayChangeServing: (fields: string[]) => Promise<void>,
    beforeWrite: (details: { name: string; changed: AgentChanges }) => Promise<void> = async () => {},
  ): Promise<StoredAgent> {
    const { db, hub } = this.o;
    const doc = await this.find(accountId, id);
    const set: Record<string, unknown> = {};
    const changed: AgentChanges = {};
    const name = input.name?.trim();
    if (name !== undefined && name !== doc.name) {
      if (await db.agents.exists({ account_id: doc.account_id, name })) throw duplicateName(name);
      set.name = name;
      changed.name = { from: doc.name, to: name };
    }
    if (input.labels !== undefined && !sameList(input.labels, doc.labels)) {
      set.labels = input.labels;
      changed.labels = { from: [...doc.labels], to: input.labels };
    }
    if (input.max_jobs !== undefined && input.max_jobs !== (doc.job_limit ?? null)) {
      set.job_limit = input.max_jobs;
      changed.max_jobs = { from: doc.job_limit ?? null, to: input.max_jobs };
    }
    const serving = (['labels', 'max_jobs'] as const).filter((f) => changed[f]);
    if (serving.length > 0 && isApproved(doc)) await mayChangeServing(serving);
    await beforeWrite({ name: name ?? doc.name, changed });
    if (Object.keys(set).length === 0) return doc;
    let updated: StoredAgent | null;
    try {
      updated = await hub.writeAgent(String(doc._id), () => db.agents.findOneAndUpdate(
        { _id: doc._id, account_id: doc.account_id }, { $set: set }, { new: true },
      ).lean()) as StoredAgent | null;
    } catch (err) {
      if (isDuplicateKey(err) && name !== undefined) throw duplicateName(name);
      throw err;
    }
    if (!updated) throw agentNotFound(id);
    return updated;
  }

  /**
   * Approves the account's agent (`POST /agents/:id/approve`; the route checks the caller is an
   * administrator): from now on it serves connections not pinned to it. Already approved (or stored
   * before approval existed): unchanged, and `beforeWrite` is not called (nothing to record).
   */
  async approve(
    accountId: AccountId, id: string, by: Actor, beforeWrite: (doc: StoredAgent) => Promise<void> = async () => {},
  ): Promise<StoredAgent> {
    const { db, hub } = this.o;
    const doc = await this.find(accountId, id);
    if (isApproved(doc)) return doc;
    await beforeWrite(doc);
    const updated = await hub.writeAgent(String(doc._id), () => db.agents.findOneAndUpdate(
      { _id: doc._id, account_id: doc.account_id }, { $set: { approved: true, approved_at: new Date(), approved_by: by } }, { new: true },
    ).lean()) as StoredAgent | null;
    if (!updated) throw agentNotFound(id);
    return updated;
  }
}

import { randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import type { Actor, CreateAgentRequest } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { AgentDoc } from '../../../models/agent.model.js';
import { ConflictError, NotFoundError, ServiceUnavailableError } from '../../../errors.js';
import { sha256Hex } from '../../../lib/crypto.js';
import { toObjectId } from '../../../lib/pagination.js';
import { onlineWindowMs, type AgentHub } from './hub.js';

export type StoredAgent = AgentDoc & { _id: Types.ObjectId };
type AccountId = string | Types.ObjectId;

export const agentNotFound = (id: string) => new NotFoundError(`Agent ${id} not found`);
const duplicateName = (name: string) => new ConflictError(`An agent named '${name}' already exists`);

/** `agt_` + 32 random bytes base64url (43 characters). */
function newToken(): string {
  return `agt_${randomBytes(32).toString('base64url')}`;
}

/** What the choice of an agent needs to know about a connection. */
export interface ConnectionRef {
  id: string;
  name: string;
  type: string;
  agent_id: Types.ObjectId | string | null | undefined;
}

/** What AgentsService needs. */
export interface AgentsServiceOptions {
  db: Models;
  /** Every write to an agent document goes through the hub, in turn (AgentHub.writeAgent). */
  hub: AgentHub;
  /** Decides how fresh a session must be to count as online (`onlineWindowMs`). */
  dispatchPollMs: number;
}

/**
 * The agent registry (decisions.md "Agents"): agents of an account, their tokens (stored as
 * SHA-256 only), who is online, and the choice of the agent that runs work on some connections.
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

  /** Ids of the in-progress jobs of each agent. */
  async runningJobsOf(agentIds: Types.ObjectId[]): Promise<Map<string, string[]>> {
    const { db } = this.o;
    const running = new Map<string, string[]>(agentIds.map((id) => [String(id), []]));
    if (agentIds.length === 0) return running;
    const jobs = await db.transfers.find({ status: 'in-progress', agent_id: { $in: agentIds } }, { agent_id: 1 }).sort({ _id: -1 }).lean();
    for (const job of jobs) running.get(String(job.agent_id))?.push(String(job._id));
    return running;
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
   * `beforeWrite` is called with what the audit record names, after the checks and right before
   * the write (plugins/app/access/audit.service.ts `change`).
   */
  async create(
    accountId: AccountId, input: CreateAgentRequest, createdBy: Actor,
    beforeWrite: (id: string, details: { name: string; labels: string[]; token_prefix: string }) => Promise<void> = async () => {},
  ): Promise<{ doc: StoredAgent; token: string }> {
    const { db } = this.o;
    const name = input.name.trim();
    if (await db.agents.exists({ account_id: accountId, name })) throw duplicateName(name);
    const token = newToken();
    const _id = new Types.ObjectId();
    await beforeWrite(String(_id), { name, labels: input.labels ?? [], token_prefix: `${token.slice(0, 12)}...` });
    try {
      const doc = await db.agents.create({
        _id,
        account_id: accountId,
        name,
        labels: input.labels ?? [],
        token_hash: sha256Hex(token),
        token_prefix: `${token.slice(0, 12)}...`,
        created_by: createdBy,
      });
      return { doc: doc.toObject() as StoredAgent, token };
    } catch (err) {
      if ((err as { code?: number }).code === 11000) throw duplicateName(name);
      throw err;
    }
  }

  /** The agent holding this token, or null (unknown or revoked: revoking deletes the agent). */
  async byToken(token: string): Promise<StoredAgent | null> {
    if (!/^agt_[A-Za-z0-9_-]{20,200}$/.test(token)) return null;
    return (await this.o.db.agents.findOne({ token_hash: sha256Hex(token) }).lean()) as StoredAgent | null;
  }

  /**
   * The agent that runs work touching these connections (decisions.md "Connections": `agent_id`):
   * the agent a connection is pinned to, else the online agent of the account having every
   * connector needed and the fewest running jobs. 409 when the connections are pinned to two
   * different agents (relays between agents are not supported yet); 503 naming the connection
   * when no suitable agent is online.
   */
  async choose(accountId: AccountId, connections: ConnectionRef[]): Promise<StoredAgent> {
    const { db } = this.o;
    const types = [...new Set(connections.map((c) => c.type))];
    const pinned = connections.filter((c) => c.agent_id);
    const pinnedIds = [...new Set(pinned.map((c) => String(c.agent_id)))];
    if (pinnedIds.length > 1) {
      const [a, b] = pinned;
      throw new ConflictError(
        `Connection '${a!.name}' is served by agent ${String(a!.agent_id)} and connection '${b!.name}' by agent ${String(b!.agent_id)}: ` +
        'transfers between two agents are not supported yet; let one agent serve both (agent_id)',
      );
    }
    if (pinnedIds.length === 1) {
      const conn = pinned[0]!;
      const agent = await db.agents.findOne({ _id: new Types.ObjectId(pinnedIds[0]), account_id: accountId }).lean() as StoredAgent | null;
      if (!agent) throw new ServiceUnavailableError(`Connection '${conn.name}' is served by agent ${pinnedIds[0]}, which no longer exists`);
      if (!this.isOnline(agent)) throw new ServiceUnavailableError(`Agent '${agent.name}', which serves connection '${conn.name}', is offline`);
      const missing = types.filter((t) => !agent.connector_types.includes(t));
      if (missing.length > 0) {
        throw new ServiceUnavailableError(`Agent '${agent.name}', which serves connection '${conn.name}', has no ${missing.join(' or ')} connector`);
      }
      return agent;
    }
    const fresh = new Date(Date.now() - onlineWindowMs(this.o.dispatchPollMs));
    const online = await db.agents.find({ account_id: accountId, 'session.last_seen_at': { $gt: fresh } }).lean() as StoredAgent[];
    const eligible = online.filter((a) => types.every((t) => a.connector_types.includes(t)));
    if (eligible.length === 0) {
      const what = connections.length === 1
        ? `connection '${connections[0]!.name}'`
        : `connections '${connections.map((c) => c.name).join("' and '")}'`;
      throw new ServiceUnavailableError(`No online agent can serve ${what} (needs ${types.join(' and ')} connector${types.length > 1 ? 's' : ''})`);
    }
    if (eligible.length === 1) return eligible[0]!;
    const running = await this.runningJobsOf(eligible.map((a) => a._id));
    const load = (a: StoredAgent) => running.get(String(a._id))!.length;
    return eligible.reduce((best, a) => (load(a) < load(best) ? a : best));
  }
}

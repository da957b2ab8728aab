import { randomBytes } from 'node:crypto';
import { Types } from 'mongoose';
import type { Actor, Agent, ConnectionType, CreateAgentRequest } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { AgentDoc } from '../../../models/agent.model.js';
import { ConflictError, NotFoundError, ServiceUnavailableError } from '../../../errors.js';
import { sha256Hex } from '../../../lib/crypto.js';
import { toObjectId } from '../../../lib/pagination.js';
import { onlineWindowMs } from './hub.js';

export type StoredAgent = AgentDoc & { _id: Types.ObjectId };
type AccountId = string | Types.ObjectId;

export const agentNotFound = (id: string) => new NotFoundError(`Agent ${id} not found`);

/** `agt_` + 32 random bytes base64url (43 characters). */
function newToken(): string {
  return `agt_${randomBytes(32).toString('base64url')}`;
}

/** Online: a session is registered and its holder refreshed it within the window. */
export function isOnline(doc: Pick<AgentDoc, 'session'>, dispatchPollMs: number, now = Date.now()): boolean {
  return !!doc.session && now - doc.session.last_seen_at.getTime() < onlineWindowMs(dispatchPollMs);
}

export function presentAgent(doc: StoredAgent, runningJobs: string[], dispatchPollMs: number): Agent {
  return {
    id: String(doc._id),
    name: doc.name,
    labels: [...doc.labels],
    status: isOnline(doc, dispatchPollMs) ? 'online' : 'offline',
    last_seen_at: doc.last_seen_at ? doc.last_seen_at.toISOString() : null,
    version: doc.version ?? null,
    hostname: doc.hostname ?? null,
    connector_types: [...doc.connector_types] as ConnectionType[],
    running_jobs: runningJobs,
    created_at: doc.created_at.toISOString(),
  };
}

/** Ids of the in-progress jobs of each agent. */
export async function runningJobsOf(db: Models, agentIds: Types.ObjectId[]): Promise<Map<string, string[]>> {
  const running = new Map<string, string[]>(agentIds.map((id) => [String(id), []]));
  if (agentIds.length === 0) return running;
  const jobs = await db.transfers.find({ status: 'in-progress', agent_id: { $in: agentIds } }, { agent_id: 1 }).sort({ _id: -1 }).lean();
  for (const job of jobs) running.get(String(job.agent_id))?.push(String(job._id));
  return running;
}

export async function findAgent(db: Models, accountId: AccountId, id: string): Promise<StoredAgent> {
  const _id = toObjectId(id);
  const doc = _id && await db.agents.findOne({ _id, account_id: accountId }).lean();
  if (!doc) throw agentNotFound(id);
  return doc as StoredAgent;
}

const duplicateName = (name: string) => new ConflictError(`An agent named '${name}' already exists`);

/** Creates an agent and returns its token, the only time it exists outside the agent's hands. */
/**
 * `beforeWrite` is called with what the audit record names, after the checks and right before
 * the write (plugins/app/audit.ts `change`).
 */
export async function createAgent(
  db: Models, accountId: AccountId, input: CreateAgentRequest, createdBy: Actor,
  beforeWrite: (id: string, details: { name: string; labels: string[]; token_prefix: string }) => Promise<void> = async () => {},
): Promise<{ doc: StoredAgent; token: string }> {
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
export async function agentByToken(db: Models, token: string): Promise<StoredAgent | null> {
  if (!/^agt_[A-Za-z0-9_-]{20,200}$/.test(token)) return null;
  return (await db.agents.findOne({ token_hash: sha256Hex(token) }).lean()) as StoredAgent | null;
}

/** What the choice of an agent needs to know about a connection. */
export interface ConnectionRef {
  id: string;
  name: string;
  type: string;
  agent_id: Types.ObjectId | string | null | undefined;
}

/**
 * The agent that runs work touching these connections (decisions.md "Connections": `agent_id`):
 * the agent a connection is pinned to, else the online agent of the account having every
 * connector needed and the fewest running jobs. 409 when the connections are pinned to two
 * different agents (relays between agents are not supported yet); 503 naming the connection
 * when no suitable agent is online.
 */
export async function chooseAgent(db: Models, accountId: AccountId, connections: ConnectionRef[], dispatchPollMs: number): Promise<StoredAgent> {
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
    if (!isOnline(agent, dispatchPollMs)) throw new ServiceUnavailableError(`Agent '${agent.name}', which serves connection '${conn.name}', is offline`);
    const missing = types.filter((t) => !agent.connector_types.includes(t));
    if (missing.length > 0) {
      throw new ServiceUnavailableError(`Agent '${agent.name}', which serves connection '${conn.name}', has no ${missing.join(' or ')} connector`);
    }
    return agent;
  }
  const fresh = new Date(Date.now() - onlineWindowMs(dispatchPollMs));
  const online = await db.agents.find({ account_id: accountId, 'session.last_seen_at': { $gt: fresh } }).lean() as StoredAgent[];
  const eligible = online.filter((a) => types.every((t) => a.connector_types.includes(t)));
  if (eligible.length === 0) {
    const what = connections.length === 1
      ? `connection '${connections[0]!.name}'`
      : `connections '${connections.map((c) => c.name).join("' and '")}'`;
    throw new ServiceUnavailableError(`No online agent can serve ${what} (needs ${types.join(' and ')} connector${types.length > 1 ? 's' : ''})`);
  }
  if (eligible.length === 1) return eligible[0]!;
  const running = await runningJobsOf(db, eligible.map((a) => a._id));
  const load = (a: StoredAgent) => running.get(String(a._id))!.length;
  return eligible.reduce((best, a) => (load(a) < load(best) ? a : best));
}

import type { Types } from 'mongoose';
import { ConflictError, ServiceUnavailableError, type AppError } from '../../../errors.js';
import type { RunConnection } from '../transfers/index.js';

/** What the choice of agents knows of one agent (a stored agent, with whether it is online now). */
export interface AgentFacts {
  _id: Types.ObjectId;
  name: string;
  /** The account's labels (`POST`/`PUT /agents`). */
  labels: string[];
  /** The operator's labels (`--label`, from `hello`). */
  agent_labels?: string[] | null;
  connector_types: string[];
  /** `hello.relay`: it can play either side of a relay. */
  relay?: boolean | null;
  /** `hello.watch`: it polls watchers. */
  watch?: boolean | null;
  /** `hello.settle`: it moves and deletes verified source files (workflows). */
  settle?: boolean | null;
  /** `hello.sync`: it runs the issue-25 options (sync, move, filters, limits, windows) and plans. */
  sync?: boolean | null;
  /** The agent's own limit (`hello.max_jobs`). */
  max_jobs?: number | null;
  /** The account's limit (`PUT /agents/:id {max_jobs}`). */
  job_limit?: number | null;
  /** Approved by an administrator (`isApproved`). */
  approved?: boolean | null;
  online: boolean;
}

/**
 * Whether an administrator approved the agent (docs/security.md "Agents: approval"): only then may
 * it carry the credentials of connections not pinned to it. An agent stored before approval
 * existed has no `approved` field: it was made under the old rule and counts as approved.
 */
export function isApproved(agent: Pick<AgentFacts, 'approved'>): boolean {
  return agent.approved !== false;
}

/**
 * The pools an agent belongs to: the account's labels and its operator's, each once; none while it
 * is pending (not approved): a pool's connections are shared, and a pending agent serves nothing shared.
 */
export function poolsOf(agent: Pick<AgentFacts, 'labels' | 'agent_labels' | 'approved'>): string[] {
  if (!isApproved(agent)) return [];
  return [...new Set([...agent.labels, ...(agent.agent_labels ?? [])])];
}

/**
 * The jobs an agent may run at once: the account's limit bounded by the agent's own (from its
 * `hello`); 0 for an agent that never said hello.
 */
export function effectiveSlots(agent: Pick<AgentFacts, 'max_jobs' | 'job_limit'>): number {
  const own = agent.max_jobs ?? 0;
  return agent.job_limit ? Math.min(agent.job_limit, own) : own;
}

/** What `serves` reads of an agent. */
export type ServingFacts = Pick<AgentFacts, '_id' | 'labels' | 'agent_labels' | 'connector_types' | 'approved'>;

/** The projection of a stored agent that `serves` needs, for every place that reads agents to decide. */
export const SERVES = { labels: 1, agent_labels: 1, connector_types: 1, approved: 1 } as const;

/**
 * Whether `agent` may serve `conn` (online or not), and so receive its credentials: it has the
 * connector, and it is the agent the connection names (`agent_id`: whoever pinned it gave the
 * credentials to it), or, approved (`isApproved`), in the pool it names (`agent_pool`) or any agent
 * of the account when the connection names neither (agents belong to one account, and only the
 * account's are given). The one rule for every job, relay side, watcher, test and credential
 * opened for an agent (docs/security.md "Agents: approval").
 */
export function serves(agent: ServingFacts, conn: RunConnection): boolean {
  if (!agent.connector_types.includes(conn.type)) return false;
  if (conn.agent_id) return String(agent._id) === conn.agent_id;
  if (!isApproved(agent)) return false;
  if (conn.agent_pool) return poolsOf(agent).includes(conn.agent_pool);
  return true;
}

/**
 * How a transfer can run now: `direct` on one of `agents` (online, serving both connections);
 * `relay` from one of `sources` to one of `destinations` (online, relay-capable, no agent serving
 * both); or not at all, with the error that says why (503 while an agent coming online may change
 * it; 409 for connections pinned to two agents with relays unavailable).
 */
export type RunChoice<A extends AgentFacts = AgentFacts> =
  | { mode: 'direct'; agents: A[] }
  | { mode: 'relay'; sources: A[]; destinations: A[] }
  | { mode: null; problem: AppError };

const connectors = (types: string[]) => `${types.join(' and ')} connector${types.length > 1 ? 's' : ''}`;

/** Who may serve a connection, in words. */
function servedBy(conn: RunConnection, agents: AgentFacts[]): string {
  if (conn.agent_id) return `agent '${agents.find((a) => String(a._id) === conn.agent_id)?.name ?? conn.agent_id}'`;
  if (conn.agent_pool) return `pool '${conn.agent_pool}'`;
  return 'any agent';
}

/**
 * The online agents that would serve every one of `conns` but for their approval, named for a 503:
 * the reason work waits may be an agent nobody approved yet.
 */
function pendingNote(conns: RunConnection[], agents: AgentFacts[]): string {
  const wouldServe = (a: AgentFacts) => conns.every((c) => serves({ ...a, approved: true }, c));
  const pending = agents.filter((a) => a.online && !isApproved(a) && wouldServe(a));
  if (pending.length === 0) return '';
  return `; pending approval (POST /agents/:id/approve): ${pending.map((a) => `'${a.name}'`).join(', ')}`;
}

/** Why no online agent serves `conn` (503). */
function unservable(conn: RunConnection, agents: AgentFacts[]): AppError {
  if (conn.agent_id) {
    const agent = agents.find((a) => String(a._id) === conn.agent_id);
    if (!agent) return new ServiceUnavailableError(`Connection '${conn.name}' is served by agent ${conn.agent_id}, which no longer exists`);
    if (!agent.online) return new ServiceUnavailableError(`Agent '${agent.name}', which serves connection '${conn.name}', is offline`);
    return new ServiceUnavailableError(`Agent '${agent.name}', which serves connection '${conn.name}', has no ${conn.type} connector`);
  }
  if (conn.agent_pool) {
    return new ServiceUnavailableError(`No online agent of pool '${conn.agent_pool}' can serve connection '${conn.name}' (needs ${connectors([conn.type])})${pendingNote([conn], agents)}`);
  }
  return new ServiceUnavailableError(`No online agent can serve connection '${conn.name}' (needs ${connectors([conn.type])})${pendingNote([conn], agents)}`);
}

/**
 * The agents that may run one connection's work now (a connection test): online, serving it;
 * or the 503 saying why there are none.
 */
export function chooseFor<A extends AgentFacts>(conn: RunConnection, agents: A[]): A[] | AppError {
  const eligible = agents.filter((a) => a.online && serves(a, conn));
  return eligible.length > 0 ? eligible : unservable(conn, agents);
}

/**
 * How a transfer from `source` to `destination` can run now, among the account's `agents`
 * (docs/architecture.md "Queue, slots, pools and failover"): direct whenever an online agent
 * serves both, even a busy one (the transfer waits for it); else relayed, when `relays` are
 * available and an online relay-capable agent serves each end; else the error saying why not.
 */
export function chooseRun<A extends AgentFacts>(source: RunConnection, destination: RunConnection, agents: A[], relays: boolean, needs: RunNeeds = {}): RunChoice<A> {
  if (!needs.sync && !needs.direct) return chooseAny(source, destination, agents, relays);
  // Only agents that run the options (both sides of a relay); a plan's run never relayed.
  const choice = chooseAny(source, destination, needs.sync ? agents.filter((a) => a.sync) : agents, relays && !needs.direct);
  if (choice.mode !== null || !needs.sync) return choice;
  // Say so when agents without `sync` could have run it: they are what the transfer waits for.
  if (chooseAny(source, destination, agents, relays && !needs.direct).mode === null) return choice;
  return {
    mode: null,
    problem: new ServiceUnavailableError(`${choice.problem.message}: this transfer uses sync, move, filters, limits, a window or a plan, which only agents `
      + 'that run them can run (xfer-agent with issue 25 or later: hello.sync); update the agents that serve its connections'),
  };
}

/**
 * What a run needs of its agents besides serving its connections: `sync`, agents that said
 * `hello.sync` (plugins/app/transfers/options.ts `needsSync`); `direct`, one agent for both ends
 * (a plan's run: the plan was computed, and is applied, by one agent seeing both sides).
 */
export interface RunNeeds {
  sync?: boolean;
  direct?: boolean;
}

function chooseAny<A extends AgentFacts>(source: RunConnection, destination: RunConnection, agents: A[], relays: boolean): RunChoice<A> {
  const both = () => `Connection '${source.name}' is served by ${servedBy(source, agents)} and connection '${destination.name}' by ${servedBy(destination, agents)}`;
  const noRelays = () => `${both()}: no agent serves both ends and relays are unavailable; let one agent serve both (agent_id or agent_pool)`;
  // Pinned to two agents without relays: no agent coming online changes that.
  if (!relays && source.agent_id && destination.agent_id && source.agent_id !== destination.agent_id) {
    return { mode: null, problem: new ConflictError(noRelays()) };
  }
  const online = agents.filter((a) => a.online);
  const direct = online.filter((a) => serves(a, source) && serves(a, destination));
  if (direct.length > 0) return { mode: 'direct', agents: direct };
  const sources = online.filter((a) => a.relay && serves(a, source));
  const destinations = online.filter((a) => a.relay && serves(a, destination));
  if (relays && sources.length > 0 && destinations.length > 0) return { mode: 'relay', sources, destinations };

  const anyAgent = (c: RunConnection) => !c.agent_id && !c.agent_pool;
  if (anyAgent(source) && anyAgent(destination)) {
    const types = [...new Set([source.type, destination.type])];
    const what = source.id === destination.id ? `connection '${source.name}'` : `connections '${source.name}' and '${destination.name}'`;
    return { mode: null, problem: new ServiceUnavailableError(`No online agent can serve ${what} (needs ${connectors(types)})${pendingNote([source, destination], agents)}`) };
  }
  for (const end of [source, destination]) {
    if (!online.some((a) => serves(a, end))) return { mode: null, problem: unservable(end, agents) };
  }
  if (!relays) return { mode: null, problem: new ServiceUnavailableError(noRelays()) };
  return {
    mode: null,
    problem: new ServiceUnavailableError(`${both()}: no online agent serves both ends, and no pair of online relay-capable agents serves them`),
  };
}

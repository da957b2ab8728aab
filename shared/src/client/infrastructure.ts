import type { Agent, CreateAgentRequest, CreatedAgent, ListAgentsQuery, TestResult, UpdateAgentRequest } from '../schemas/agents.js';
import type { Deleted, Page } from '../schemas/common.js';
import type { Connection, CreateConnectionRequest, ListConnectionsQuery, UpdateConnectionRequest } from '../schemas/connections.js';
import type { PageIterator } from './paging.js';
import { Resource, seg, type Warned } from './resource.js';
import type { CallSettings } from './transport.js';

/** `/connections`: storage endpoints; credentials are write-only. */
export class ConnectionsApi extends Resource {
  list(query?: ListConnectionsQuery, s?: CallSettings): Promise<Page<Connection>> { return this.page('/connections', query, s); }
  all(query?: ListConnectionsQuery, s?: CallSettings): PageIterator<Connection> { return this.pager('/connections', query, s); }
  get(id: string, s?: CallSettings): Promise<Connection> { return this.data('GET', `/connections/${seg(id)}`, s); }
  /** 409 when the name is taken in the account. */
  create(body: CreateConnectionRequest, s?: CallSettings): Promise<Connection> {
    return this.data('POST', '/connections', { ...s, json: body });
  }
  /** Only the given fields change; `null` clears `host`, `port`, `agent_id` or `agent_pool`. */
  update(id: string, body: UpdateConnectionRequest, s?: CallSettings): Promise<Connection> {
    return this.data('PUT', `/connections/${seg(id)}`, { ...s, json: body });
  }
  delete(id: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/connections/${seg(id)}`, s); }
  /** Runs the check on the agent serving the connection: 200 with `success: false` when it fails, 503 when no agent can. */
  test(id: string, s?: CallSettings): Promise<TestResult> { return this.data('POST', `/connections/${seg(id)}/test`, s); }
}

/** `/agents`: the managed agents that reach customer storage. */
export class AgentsApi extends Resource {
  list(query?: ListAgentsQuery, s?: CallSettings): Promise<Page<Agent>> { return this.page('/agents', query, s); }
  all(query?: ListAgentsQuery, s?: CallSettings): PageIterator<Agent> { return this.pager('/agents', query, s); }
  get(id: string, s?: CallSettings): Promise<Agent> { return this.data('GET', `/agents/${seg(id)}`, s); }
  /** `data.token` (`agt_…`) is shown this once; `warning` says so. */
  create(body: CreateAgentRequest, s?: CallSettings): Promise<Warned<CreatedAgent>> {
    return this.warned('POST', '/agents', { ...s, json: body });
  }
  /**
   * Only the given fields change: `name` (409 when taken), `labels` (the account's; the agent's
   * own `--label`s stay), `max_jobs` (a cap below the agent's own; `null` removes it).
   */
  update(id: string, body: UpdateAgentRequest, s?: CallSettings): Promise<Agent> {
    return this.data('PUT', `/agents/${seg(id)}`, { ...s, json: body });
  }
  /** Revokes at once: the agent's socket is closed and its running jobs fail. */
  delete(id: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/agents/${seg(id)}`, s); }
  /** A ping through the agent's socket; 503 when it is offline. */
  test(id: string, s?: CallSettings): Promise<TestResult> { return this.data('POST', `/agents/${seg(id)}/test`, s); }
  /** Approves a pending agent: it serves connections not pinned to it from now on. An administrator's act (403 otherwise). */
  approve(id: string, s?: CallSettings): Promise<Agent> { return this.data('POST', `/agents/${seg(id)}/approve`, s); }
}

import fp from 'fastify-plugin';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { AgentsService } from './agents.service.js';
import { AgentHub } from './hub.js';
import { AgentRequests } from './requests.js';
import { Dispatcher } from './dispatch.js';
import { advertisedUrl } from '../../../config.js';

export { AgentsService, agentNotFound, type AgentLoad, type StoredAgent } from './agents.service.js';
export { chooseRun, effectiveSlots, isApproved, poolsOf, serves, SERVES, type AgentFacts, type ServingFacts, type RunChoice, type RunNeeds } from './eligibility.js';
export type { AgentHub } from './hub.js';
export type { WatchReport } from './events.js';
export type { AgentRequests, AgentCall } from './requests.js';
export type { Dispatcher, RelayStarter } from './dispatch.js';
export type { AgentIdentity, AgentRelayMessage, AgentSession, RelayTraffic, Sent } from './session.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The agent registry: agents, their tokens, pools and limits, who is online, which agents could run what. */
    agents: AgentsService;
    /** The agent sockets held by this instance. */
    agentHub: AgentHub;
    /** Request/answer round trips with agents (`ping`, `connection.test`). */
    agentRequests: AgentRequests;
    /**
     * The coordination loop: `wake()` after a change made here; `stopping` aborts at shutdown;
     * `relayWith()` takes the relay domain's RelayStarter, and `relays` says whether it has one.
     */
    dispatcher: Dispatcher;
  }
}

/** A name for this process in the database: sessions and leases say which instance holds them. */
function newInstanceId(): string {
  return `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
}

/**
 * The agent gateway: the sockets of the agents (hub.ts, one session.ts each, their runs in
 * runs.ts), the requests to them (requests.ts), the loop that starts waiting transfers on them
 * (scheduler.ts, by eligibility.ts) and sends them work (dispatch.ts), and the registry of agents
 * (agents.service.ts). Built in the order they talk: the hub applies
 * reports to the transfers; requests listen to the hub's replies; the dispatcher wakes on the
 * hub's ready sessions and on queued requests (events.ts).
 *
 * Words: the API and the control plane say "transfer"; the agent protocol says "job"
 * (`job.assign`, `job.progress`, `job_id`). A job is one run (attempt) of a transfer, and its
 * `job_id` is the transfer's id. Code that speaks the protocol (runs.ts, dispatch.ts, session.ts)
 * says job; the transfers domain (plugins/app/transfers/) says transfer.
 */
export default fp(
  async (app) => {
    const { config } = app;
    const hub = new AgentHub({
      instanceId: newInstanceId(),
      instanceUrl: () => advertisedUrl(config, app.server.listening ? app.server.address() : null),
      heartbeatMs: config.agentHeartbeatMs,
      helloTimeoutMs: config.agentHelloTimeoutMs,
      leaseMs: config.jobLeaseMs,
      db: app.db,
      audit: app.audit,
      transfers: app.transfers,
      connections: app.connections,
      log: app.log,
    });
    const requests = new AgentRequests({
      db: app.db,
      connections: app.connections,
      hub,
      timeoutMs: config.agentRequestTimeoutMs,
      pollMs: Math.max(100, config.dispatchPollMs),
      log: app.log,
    });
    const agents = new AgentsService({ db: app.db, hub, dispatchPollMs: config.dispatchPollMs, slots: app.transfers.slots });
    const dispatcher = new Dispatcher({
      db: app.db, hub, requests, agents, transfers: app.transfers, connections: app.connections,
      dispatchPollMs: config.dispatchPollMs, leaseMs: config.jobLeaseMs, orphanTimeoutMs: config.jobOrphanTimeoutMs, log: app.log,
    });
    app.decorate('agents', agents);
    app.decorate('agentHub', hub);
    // Read when scraped: the sockets this instance holds (Prometheus sums the instances).
    app.metrics.countAgentsWith(() => hub.openSessions().length);
    app.decorate('agentRequests', requests);
    app.decorate('dispatcher', dispatcher);
    app.addHook('onReady', async () => dispatcher.start());
    app.addHook('preClose', () => dispatcher.stop());
  },
  { name: 'agents', dependencies: ['mongoose', 'audit', 'transfers', 'connections', 'metrics'] },
);

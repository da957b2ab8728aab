import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket } from 'ws';
import { Types } from 'mongoose';
import { CloseCodes, type AgentMessage } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { AuditService } from '../access/index.js';
import type { TransfersService } from '../transfers/index.js';
import type { ConnectionsService } from '../connections/index.js';
import { AgentSession, type AgentIdentity, type Hello, type RelayTraffic, type Welcome } from './session.js';
import { KeyedMutex } from '../../../lib/keyed-mutex.js';
import { AgentRuns } from './runs.js';
import { answerVerifiedQuery } from './verified-lookup.js';
import { AppError, ConflictError } from '../../../errors.js';
import { Events, type HubEvents } from './events.js';

/** How often the instance holding a session writes `session.last_seen_at`. */
export const SESSION_REFRESH_MS = 2_000;

/** An agent is online while its session was refreshed within this window (three missed refreshes). */
export function onlineWindowMs(dispatchPollMs: number): number {
  return 3 * Math.max(SESSION_REFRESH_MS, dispatchPollMs);
}

/** What the hub needs; it builds its AgentRuns from these. */
export interface AgentHubOptions {
  instanceId: string;
  /**
   * The URL other instances reach this one at (`XFER_INSTANCE_URL`, or derived from the listen
   * address), recorded with every session held here: a relay's host dials it when the relay's
   * source agent is connected here (plugins/app/relay/). Null until the app listens.
   */
  instanceUrl: () => string | null;
  heartbeatMs: number;
  helloTimeoutMs: number;
  leaseMs: number;
  db: Models;
  audit: AuditService;
  transfers: TransfersService;
  /** Stores credentials an agent reports rotated (`connection.credentials`). */
  connections: ConnectionsService;
  log: FastifyBaseLogger;
}

/**
 * The agent sockets held by this instance: registers sessions in the database (so every
 * instance knows who is online and a newer session elsewhere replaces this one) and routes the
 * agents' messages: job reports to AgentRuns, replies to the listeners of its `reply` event
 * (requests.ts). What it tells the rest of the gateway goes through its events (events.ts HubEvents).
 */
export class AgentHub {
  readonly instanceId: string;
  private readonly events = new Events<HubEvents>();
  private readonly current = new Map<string, AgentSession>();
  private readonly all = new Set<AgentSession>();
  private readonly agentLocks = new KeyedMutex();
  private readonly runs: AgentRuns;
  private relays: RelayTraffic | null = null;
  private lastRefresh = 0;

  constructor(private readonly o: AgentHubOptions) {
    this.instanceId = o.instanceId;
    this.runs = new AgentRuns({ transfers: o.transfers, instanceId: o.instanceId, heartbeatMs: o.heartbeatMs, log: o.log, events: this.events });
  }

  /** Subscribes to the hub's events (HubEvents). */
  on<E extends keyof HubEvents>(event: E, listener: HubEvents[E]): void {
    this.events.on(event, listener);
  }

  /**
   * Hands the relay traffic of every session to `traffic` (plugins/app/relay/); from then on the
   * welcome offers relays to agents that can play them. Without it, relay frames are protocol errors.
   */
  routeRelays(traffic: RelayTraffic): void {
    this.relays = traffic;
  }

  /** Takes over an authenticated socket. */
  accept(socket: WebSocket, agent: AgentIdentity, ip: string): AgentSession {
    const session = new AgentSession(socket, agent, {
      heartbeatMs: this.o.heartbeatMs,
      helloTimeoutMs: this.o.helloTimeoutMs,
      log: this.o.log,
      handlers: {
        hello: (s, hello) => this.onHello(s, hello, ip),
        message: (s, message) => this.onMessage(s, message),
        closed: (s, code) => this.onClosed(s, code, ip),
        relay: () => this.relays,
      },
    });
    this.all.add(session);
    return session;
  }

  /**
   * A write to an agent document, in turn with this process's other writes to it (FerretDB
   * updates are not atomic: lib/keyed-mutex.ts). Every writer of `agents` goes through here.
   */
  writeAgent<T>(agentId: string, section: () => Promise<T>): Promise<T> {
    return this.agentLocks.run(agentId, section);
  }

  /** The open session of an agent on this instance. */
  get(agentId: string): AgentSession | undefined {
    const session = this.current.get(agentId);
    return session?.open ? session : undefined;
  }

  openSessions(): AgentSession[] {
    return [...this.current.values()].filter((s) => s.open);
  }

  /** Closes the agent's socket here, if it is here (the revoke shortcut; other instances notice in sync()). */
  closeAgent(agentId: string, code: number, reason: string): void {
    this.current.get(agentId)?.close(code, reason);
  }

  /** Closes every socket (shutdown) and waits, at most `waitMs`, for their cleanup. */
  async closeAll(code: number, reason: string, waitMs: number): Promise<void> {
    const sessions = [...this.all];
    for (const s of sessions) s.close(code, reason);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)));
    await Promise.race([Promise.all(sessions.map((s) => s.closed)), timeout]);
    clearTimeout(timer);
    for (const s of sessions) if (s.state !== 'closed') s.terminate();
  }

  /**
   * Run by the dispatcher loop: closes sessions whose agent was revoked (document gone) or that
   * another session replaced (`session_id` changed), and refreshes the others' `last_seen_at`.
   */
  async sync(): Promise<void> {
    const sessions = this.openSessions();
    if (sessions.length === 0) return;
    const ids = sessions.map((s) => new Types.ObjectId(s.agent.id));
    const docs = await this.o.db.agents.find({ _id: { $in: ids } }, { session: 1 }).lean();
    const byId = new Map(docs.map((d) => [String(d._id), d]));
    const live: AgentSession[] = [];
    for (const s of sessions) {
      const doc = byId.get(s.agent.id);
      if (!doc) s.close(CloseCodes.revoked, 'agent revoked');
      else if (doc.session && doc.session.session_id !== s.sessionId) s.close(CloseCodes.replaced, 'another session of this agent connected');
      else live.push(s);
    }
    const now = new Date();
    if (live.length === 0 || now.getTime() - this.lastRefresh < SESSION_REFRESH_MS) return;
    this.lastRefresh = now.getTime();
    for (const s of live) {
      await this.writeAgent(s.agent.id, () => this.o.db.agents.updateOne(
        { _id: new Types.ObjectId(s.agent.id), $or: [{ 'session.session_id': s.sessionId }, { session: null }] },
        { $set: { session: this.sessionDoc(s, now), last_seen_at: s.lastHeardAt } },
      ));
    }
  }

  /** Run by the dispatcher loop: see AgentRuns.reconcile. */
  reconcileJobs(): Promise<void> {
    return this.runs.reconcile(this.openSessions());
  }

  /** Jobs that must not be sent to their agent yet: an older run of them is still stopping there. */
  stoppingJobs(): string[] {
    return this.openSessions().flatMap((s) => [...s.stopping.keys()]);
  }

  private sessionDoc(s: AgentSession, now: Date) {
    return { instance_id: this.instanceId, instance_url: this.o.instanceUrl(), session_id: s.sessionId, connected_at: s.connectedAt, last_seen_at: now };
  }

  private async onHello(session: AgentSession, hello: Hello, ip: string): Promise<Welcome | null> {
    const agentId = session.agent.id;
    const now = new Date();
    // Writing our session id is what replaces an older session on any instance (see sync()).
    const doc = await this.writeAgent(agentId, () => this.o.db.agents.findOneAndUpdate(
      { _id: new Types.ObjectId(agentId) },
      { $set: {
        session: this.sessionDoc(session, now), version: hello.version, hostname: hello.hostname,
        connector_types: [...new Set(hello.connector_types)], max_jobs: hello.max_jobs, last_seen_at: now,
        agent_labels: [...new Set(hello.labels ?? [])], relay: hello.relay === true, watch: hello.watch === true,
        settle: hello.settle === true, sync: hello.sync === true,
      } },
      { new: true },
    ).lean());
    if (!doc) {
      session.close(CloseCodes.revoked, 'agent revoked');
      return null;
    }
    if (session.state !== 'welcoming') return null;
    const previous = this.current.get(agentId);
    if (previous && previous !== session) previous.close(CloseCodes.replaced, 'another session of this agent connected');
    this.current.set(agentId, session);
    const abortJobs = await this.runs.adopt(session, hello.running_jobs, hello.held_jobs ?? []);
    await this.o.audit.record({
      accountId: session.agent.accountId, actor: { type: 'agent', id: agentId }, action: 'agent.connect',
      resource: { type: 'agent', id: agentId }, ip, outcome: 'success',
      details: { version: hello.version, hostname: hello.hostname, connector_types: hello.connector_types, running_jobs: hello.running_jobs.length },
    });
    // After the welcome (sent when this returns).
    setImmediate(() => {
      const failed = (err: unknown) => {
        // Never out of a timer callback (that ends the process): this session only.
        this.o.log.error({ err, agentId }, 'starting an agent session failed');
        session.close(1011, 'internal error');
      };
      try {
        this.runs.startResync(session);
        this.events.emit('ready', session).catch(failed);
      } catch (err) {
        failed(err);
      }
    });
    return {
      agent_id: agentId, heartbeat_ms: this.o.heartbeatMs, lease_ms: this.o.leaseMs, abort_jobs: abortJobs,
      ...(hello.acks ? { acks: true } : {}), verified_lookup: true, ...(hello.relay && this.relays ? { relay: true } : {}),
    };
  }

  private async onMessage(session: AgentSession, message: Exclude<AgentMessage, { type: 'hello' | `relay.${string}` }>): Promise<void> {
    if (message.type === 'pong' && message.payload.request_id === this.runs.resyncId(session)) {
      if (session.unconfirmed.size > 0) await this.runs.settle(session);
      return;
    }
    if (message.type === 'pong' || message.type === 'connection.test.result' || message.type === 'source.settle.result') {
      return this.events.emit('reply', session, message);
    }
    if (message.type === 'connection.credentials') return this.rotatedCredentials(session, message.payload);
    if (message.type === 'job.verified.query') return answerVerifiedQuery(session, message.payload, this.o.transfers, this.o.log);
    if (message.type === 'watch.found' || message.type === 'watch.polled') return this.events.emit('watch', session, message);
    if (message.type === 'plan.items' || message.type === 'plan.done' || message.type === 'plan.failed' || message.type === 'job.plan.query') {
      return this.events.emit('plan', session, message);
    }
    await this.runs.report(session, message);
  }

  /**
   * Stores credentials the agent's connector saw rotated (storeRotatedCredentials decides what is
   * allowed). A refusal is audited and logged, never answered: the agent goes on with the token it
   * holds, and the session stays open (a connection deleted meanwhile is no protocol error).
   * Neither the audit record nor the log holds a credential value.
   */
  private async rotatedCredentials(session: AgentSession, payload: Extract<AgentMessage, { type: 'connection.credentials' }>['payload']): Promise<void> {
    const { accountId, id: agentId } = session.agent;
    const fields = Object.keys(payload.credentials).sort();
    let outcome: string;
    let reason: string | undefined;
    const by = { accountId, actor: { type: 'agent' as const, id: agentId }, ip: null };
    const record = { action: 'connection.credentials.rotate', resource: { type: 'connection', id: payload.connection_id } };
    // A store is recorded write-ahead (plugins/app/access/audit.service.ts `change`); answers that change nothing are recorded after.
    let announced = false;
    try {
      outcome = await this.o.audit.change(by, async (announce) => {
        const result = await this.o.connections.storeRotatedCredentials(
          accountId, agentId, payload.connection_id, payload.credentials, payload.previous_sha256,
          async () => {
            if (announced) return; // a retry after a concurrent edit: the record stands
            announced = true;
            await announce({ ...record, outcome: 'success', details: { fields, result: 'stored' } });
          },
        );
        if (announced && result !== 'stored') throw new ConflictError(`the rotated credentials were not stored (${result})`);
        return result;
      });
    } catch (err) {
      if (!(err instanceof AppError) || err.statusCode >= 500) throw err;
      outcome = 'refused';
      reason = (err as Error).message;
      this.o.log.warn({ agentId, connectionId: payload.connection_id, fields, reason }, 'rotated credentials refused');
    }
    if (!announced) {
      await this.o.audit.record({
        ...by, ...record, outcome: outcome === 'refused' ? 'failure' : 'success', details: { fields, result: outcome, ...(reason ? { reason } : {}) },
      });
    }
  }

  private async onClosed(session: AgentSession, code: number, ip: string): Promise<void> {
    try {
      await this.cleanUp(session, code, ip);
    } finally {
      // Only now: closeAll() waits for sessions still in `all`, so shutdown waits for this cleanup.
      this.all.delete(session);
    }
  }

  private async cleanUp(session: AgentSession, code: number, ip: string): Promise<void> {
    const agentId = session.agent.id;
    if (this.current.get(agentId) === session) this.current.delete(agentId);
    if (session.hello) {
      await this.writeAgent(agentId, () => this.o.db.agents.updateOne(
        { _id: new Types.ObjectId(agentId), 'session.session_id': session.sessionId },
        { $set: { session: null, last_seen_at: session.lastHeardAt } },
      ));
      await this.o.audit.record({
        accountId: session.agent.accountId, actor: { type: 'agent', id: agentId }, action: 'agent.disconnect',
        resource: { type: 'agent', id: agentId }, ip, outcome: 'success', details: { close_code: code, running_jobs: session.jobs.size },
      });
    }
    await this.events.emit('closed', session);
  }
}

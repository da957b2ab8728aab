import { performance } from 'node:perf_hooks';
import type { FastifyBaseLogger } from 'fastify';
import { Types } from 'mongoose';
import type { TestResult } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { AgentRequestKind } from '../../../models/agent-request.model.js';
import { Notifier } from '../../../lib/notifier.js';
import type { ConnectionsService } from '../connections/index.js';
import type { AgentHub } from './hub.js';
import type { AgentSession } from './session.js';
import { Events } from './events.js';

export interface AgentCall {
  accountId: string;
  agentId: string;
  kind: AgentRequestKind;
  /** For `connection.test`. */
  connectionId?: string;
}

/** What AgentRequests needs: it subscribes to the hub's `reply` and `closed` events. */
export interface AgentRequestsOptions {
  db: Models;
  /** Opens a connection's settings for `connection.test`, only when it is sent. */
  connections: ConnectionsService;
  /** Where replies and closed sessions come from; its sessions carry the requests. */
  hub: AgentHub;
  timeoutMs: number;
  pollMs: number;
  log: FastifyBaseLogger;
}

/** What AgentRequests tells the dispatcher (subscribe with `AgentRequests.on`). */
export type RequestEvents = {
  /**
   * A request was written and waits to be sent: the dispatcher loop runs now (the in-process
   * shortcut when the agent's socket is here; other instances find it on their next tick).
   */
  queued: () => void;
};

interface InFlight {
  session: AgentSession;
  kind: AgentRequestKind;
  sentAt: number;
}

/**
 * Request/answer round trips with agents (`ping`, `connection.test`) from any instance: the
 * caller writes an `agent_requests` row, the instance holding the agent's socket claims it,
 * sends it (decrypting the connection only then) and writes the answer back; the caller reads it.
 */
export class AgentRequests {
  private readonly answered = new Notifier();
  private readonly inFlight = new Map<string, InFlight>();
  private readonly events = new Events<RequestEvents>();

  constructor(private readonly o: AgentRequestsOptions) {
    o.hub.on('reply', async (session, reply) => {
      const id = reply.payload.request_id;
      const sent = this.inFlight.get(id);
      const expected = reply.type === 'pong' ? 'ping' : 'connection.test';
      if (!sent || sent.session !== session || sent.kind !== expected) return;
      this.inFlight.delete(id);
      const elapsed = Math.round(performance.now() - sent.sentAt);
      await this.answer(id, reply.type === 'pong'
        ? { success: true, message: `Agent ${session.agent.name} answered in ${elapsed} ms`, latency_ms: elapsed }
        : { success: reply.payload.success, message: reply.payload.message, latency_ms: reply.payload.latency_ms });
    });
    o.hub.on('closed', async (session) => {
      for (const [id, sent] of this.inFlight) {
        if (sent.session !== session) continue;
        this.inFlight.delete(id);
        await this.answer(id, { success: false, message: `Agent ${session.agent.name} disconnected before answering`, latency_ms: Math.round(performance.now() - sent.sentAt) });
      }
    });
  }

  /** Subscribes to the requests' events (RequestEvents). */
  on<E extends keyof RequestEvents>(event: E, listener: RequestEvents[E]): void {
    this.events.on(event, listener);
  }

  /** Runs a request on an agent and waits for its answer, at most the configured timeout. */
  async call(call: AgentCall, signal?: AbortSignal): Promise<TestResult> {
    const started = performance.now();
    const deadline = Date.now() + this.o.timeoutMs;
    const doc = await this.o.db.agentRequests.create({
      account_id: new Types.ObjectId(call.accountId),
      agent_id: new Types.ObjectId(call.agentId),
      kind: call.kind,
      connection_id: call.connectionId ? new Types.ObjectId(call.connectionId) : null,
      // Kept a while past the deadline so the holder can still write a late answer; the sweeper removes it.
      expires_at: new Date(deadline + 60_000),
    });
    const id = String(doc._id);
    await this.events.emit('queued');
    try {
      for (;;) {
        const current = await this.o.db.agentRequests.findById(doc._id, { status: 1, result: 1 }).lean();
        if (current?.status === 'done' && current.result) {
          const { success, message, latency_ms } = current.result;
          return { success: success ?? false, message: message ?? '', latency_ms: latency_ms ?? 0 };
        }
        const left = deadline - Date.now();
        if (left <= 0 || signal?.aborted) break;
        await this.answered.wait(id, Math.min(left, this.o.pollMs), signal);
      }
    } finally {
      await this.o.db.agentRequests.deleteOne({ _id: doc._id }).catch(() => {});
    }
    const seconds = Math.round(this.o.timeoutMs / 1000);
    return { success: false, message: `agent did not answer within ${seconds} s`, latency_ms: Math.round(performance.now() - started) };
  }

  /** Run by the dispatcher loop: claims and sends the pending requests for agents whose sockets are here. */
  async serve(): Promise<void> {
    const sessions = this.o.hub.openSessions();
    if (sessions.length === 0) return;
    const pending = await this.o.db.agentRequests
      .find({ status: 'pending', agent_id: { $in: sessions.map((s) => new Types.ObjectId(s.agent.id)) } })
      .limit(100).lean();
    for (const request of pending) {
      const claimed = await this.o.db.agentRequests.findOneAndUpdate(
        { _id: request._id, status: 'pending' },
        { $set: { status: 'sent', instance_id: this.o.hub.instanceId } },
        { new: true },
      ).lean();
      if (claimed) await this.send(String(claimed._id), claimed.kind as AgentRequestKind, String(claimed.account_id), String(claimed.agent_id), claimed.connection_id);
    }
  }

  /**
   * Removes rows whose callers gave up long ago (no TTL indexes: FerretDB has none), and forgets
   * requests sent to an agent that never answered them: their caller stopped waiting, and an
   * agent that ignores requests must not grow `inFlight` for as long as its session lasts.
   */
  async sweep(): Promise<void> {
    const givenUp = performance.now() - this.o.timeoutMs - 60_000;
    for (const [id, sent] of this.inFlight) if (sent.sentAt < givenUp) this.inFlight.delete(id);
    await this.o.db.agentRequests.deleteMany({ expires_at: { $lt: new Date() } });
  }

  private async send(id: string, kind: AgentRequestKind, accountId: string, agentId: string, connectionId: Types.ObjectId | null | undefined): Promise<void> {
    const session = this.o.hub.get(agentId);
    if (!session) return this.answer(id, { success: false, message: 'The agent disconnected before the request could be sent', latency_ms: 0 });
    if (kind === 'ping') {
      this.inFlight.set(id, { session, kind, sentAt: performance.now() });
      if (!session.send('ping', { request_id: id })) await this.lost(id);
      return;
    }
    let connection;
    try {
      connection = await this.o.connections.loadSettings(accountId, String(connectionId));
    } catch (err) {
      this.o.log.warn({ err, connectionId: String(connectionId) }, 'connection test: connection could not be loaded');
      return this.answer(id, { success: false, message: 'The connection no longer exists or its credentials cannot be decrypted', latency_ms: 0 });
    }
    this.inFlight.set(id, { session, kind, sentAt: performance.now() });
    if (!session.send('connection.test', { request_id: id, connection })) await this.lost(id);
  }

  private async lost(id: string): Promise<void> {
    this.inFlight.delete(id);
    await this.answer(id, { success: false, message: 'The agent disconnected before the request could be sent', latency_ms: 0 });
  }

  private async answer(id: string, result: TestResult): Promise<void> {
    await this.o.db.agentRequests.updateOne({ _id: new Types.ObjectId(id), status: { $ne: 'done' } }, { $set: { status: 'done', result } });
    this.answered.notify(id);
  }
}

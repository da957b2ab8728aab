import { performance } from 'node:perf_hooks';
import type { FastifyBaseLogger } from 'fastify';
import { Types } from 'mongoose';
import type { SettleAction, SettleFile, SettleResult, TestResult } from '@xfer/shared';
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
  kind: Exclude<AgentRequestKind, 'source.settle'>;
  /** For `connection.test`. */
  connectionId?: string;
}

/** A `source.settle` (settle-protocol.ts): a batch of a transfer's verified source files to move or delete. */
export interface SettleCall {
  accountId: string;
  agentId: string;
  connectionId: string;
  action: SettleAction;
  source_path: string;
  to?: string;
  files: SettleFile[];
}

/** The agent's answer to a `source.settle`: a result per file, or `error` for the request as a whole. */
export interface Settled {
  results: SettleResult[];
  error?: string;
}

/** What AgentRequests needs: it subscribes to the hub's `reply` and `closed` events. */
export interface AgentRequestsOptions {
  db: Models;
  /** Opens a connection's settings for `connection.test` and `source.settle`, only when it is sent. */
  connections: ConnectionsService;
  /** Where replies and closed sessions come from; its sessions carry the requests. */
  hub: AgentHub;
  /** How long a ping or connection test is waited for. */
  timeoutMs: number;
  /** How long a `source.settle` is waited for (moving files on an object store copies them): default 10 minutes. */
  settleTimeoutMs?: number;
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

const REPLY_KIND = { pong: 'ping', 'connection.test.result': 'connection.test', 'source.settle.result': 'source.settle' } as const;
export const DEFAULT_SETTLE_TIMEOUT_MS = 10 * 60_000;

/** The answer written for a request that failed before or instead of the agent's reply. */
function failed(kind: AgentRequestKind, message: string, latencyMs: number): Record<string, unknown> {
  return kind === 'source.settle' ? { settled: { results: [], error: message } } : { result: { success: false, message, latency_ms: latencyMs } };
}

/**
 * Request/answer round trips with agents (`ping`, `connection.test`, `source.settle`) from any
 * instance: the caller writes an `agent_requests` row, the instance holding the agent's socket
 * claims it, sends it (decrypting the connection only then) and writes the answer back; the caller reads it.
 */
export class AgentRequests {
  private readonly answered = new Notifier();
  private readonly inFlight = new Map<string, InFlight>();
  private readonly events = new Events<RequestEvents>();

  constructor(private readonly o: AgentRequestsOptions) {
    o.hub.on('reply', async (session, reply) => {
      const id = reply.payload.request_id;
      const sent = this.inFlight.get(id);
      if (!sent || sent.session !== session || sent.kind !== REPLY_KIND[reply.type]) return;
      this.inFlight.delete(id);
      const elapsed = Math.round(performance.now() - sent.sentAt);
      switch (reply.type) {
        case 'pong':
          return this.answer(id, { result: { success: true, message: `Agent ${session.agent.name} answered in ${elapsed} ms`, latency_ms: elapsed } });
        case 'connection.test.result':
          return this.answer(id, { result: { success: reply.payload.success, message: reply.payload.message, latency_ms: reply.payload.latency_ms } });
        case 'source.settle.result':
          return this.answer(id, { settled: { results: reply.payload.results, ...(reply.payload.error ? { error: reply.payload.error } : {}) } });
      }
    });
    o.hub.on('closed', async (session) => {
      for (const [id, sent] of this.inFlight) {
        if (sent.session !== session) continue;
        this.inFlight.delete(id);
        await this.answer(id, failed(sent.kind, `Agent ${session.agent.name} disconnected before answering`, Math.round(performance.now() - sent.sentAt)));
      }
    });
  }

  /** Subscribes to the requests' events (RequestEvents). */
  on<E extends keyof RequestEvents>(event: E, listener: RequestEvents[E]): void {
    this.events.on(event, listener);
  }

  /** Runs a ping or connection test on an agent and waits for its answer, at most the configured timeout. */
  async call(call: AgentCall, signal?: AbortSignal): Promise<TestResult> {
    const started = performance.now();
    const done = await this.roundTrip({
      account_id: new Types.ObjectId(call.accountId), agent_id: new Types.ObjectId(call.agentId), kind: call.kind,
      connection_id: call.connectionId ? new Types.ObjectId(call.connectionId) : null,
    }, this.o.timeoutMs, signal);
    if (done?.result) {
      const { success, message, latency_ms } = done.result;
      return { success: success ?? false, message: message ?? '', latency_ms: latency_ms ?? 0 };
    }
    const seconds = Math.round(this.o.timeoutMs / 1000);
    return { success: false, message: `agent did not answer within ${seconds} s`, latency_ms: Math.round(performance.now() - started) };
  }

  /** Sends a batch of files to move or delete to an agent and waits for its answer (never rejects for the agent's failures). */
  async settle(call: SettleCall, signal?: AbortSignal): Promise<Settled> {
    const timeoutMs = this.o.settleTimeoutMs ?? DEFAULT_SETTLE_TIMEOUT_MS;
    const done = await this.roundTrip({
      account_id: new Types.ObjectId(call.accountId), agent_id: new Types.ObjectId(call.agentId), kind: 'source.settle',
      connection_id: new Types.ObjectId(call.connectionId),
      body: { action: call.action, source_path: call.source_path, ...(call.to !== undefined ? { to: call.to } : {}), files: call.files },
    }, timeoutMs, signal);
    const settled = done?.settled as Settled | null | undefined;
    if (settled) return settled;
    return { results: [], error: signal?.aborted ? 'the request was abandoned (the server is stopping)' : `the agent did not answer within ${Math.round(timeoutMs / 1000)} s` };
  }

  /** Writes a request, then waits until it is answered or `timeoutMs` passed; the row is removed either way. */
  private async roundTrip(fields: Record<string, unknown>, timeoutMs: number, signal?: AbortSignal) {
    const deadline = Date.now() + timeoutMs;
    // Kept a while past the deadline so the holder can still write a late answer; the sweeper removes it.
    const doc = await this.o.db.agentRequests.create({ ...fields, expires_at: new Date(deadline + 60_000) });
    const id = String(doc._id);
    await this.events.emit('queued');
    try {
      for (;;) {
        const current = await this.o.db.agentRequests.findById(doc._id, { status: 1, result: 1, settled: 1 }).lean();
        if (current?.status === 'done') return current;
        const left = deadline - Date.now();
        if (left <= 0 || signal?.aborted) return null;
        await this.answered.wait(id, Math.min(left, this.o.pollMs), signal);
      }
    } finally {
      await this.o.db.agentRequests.deleteOne({ _id: doc._id }).catch(() => {});
    }
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
      if (claimed) await this.send(claimed);
    }
  }

  /**
   * Removes rows whose callers gave up long ago (no TTL indexes: FerretDB has none), and forgets
   * requests sent to an agent that never answered them: their caller stopped waiting, and an
   * agent that ignores requests must not grow `inFlight` for as long as its session lasts.
   */
  async sweep(): Promise<void> {
    const givenUp = performance.now() - Math.max(this.o.timeoutMs, this.o.settleTimeoutMs ?? DEFAULT_SETTLE_TIMEOUT_MS) - 60_000;
    for (const [id, sent] of this.inFlight) if (sent.sentAt < givenUp) this.inFlight.delete(id);
    await this.o.db.agentRequests.deleteMany({ expires_at: { $lt: new Date() } });
  }

  private async send(request: {
    _id: Types.ObjectId; kind: string; account_id: Types.ObjectId; agent_id: Types.ObjectId; connection_id?: Types.ObjectId | null; body?: unknown;
  }): Promise<void> {
    const id = String(request._id);
    const kind = request.kind as AgentRequestKind;
    const session = this.o.hub.get(String(request.agent_id));
    if (!session) return this.answer(id, failed(kind, 'The agent disconnected before the request could be sent', 0));
    if (kind === 'ping') {
      this.inFlight.set(id, { session, kind, sentAt: performance.now() });
      if (!session.send('ping', { request_id: id })) await this.lost(id, kind);
      return;
    }
    let connection;
    try {
      connection = await this.o.connections.settingsFor(String(request.account_id), String(request.connection_id), String(request.agent_id));
    } catch (err) {
      this.o.log.warn({ err, connectionId: String(request.connection_id), kind }, 'agent request: connection could not be loaded');
      return this.answer(id, failed(kind, 'The connection no longer exists or its credentials cannot be decrypted', 0));
    }
    this.inFlight.set(id, { session, kind, sentAt: performance.now() });
    const sent = kind === 'connection.test'
      ? session.send('connection.test', { request_id: id, connection })
      : session.send('source.settle', { request_id: id, connection, ...(request.body as Omit<SettleCall, 'accountId' | 'agentId' | 'connectionId'>) });
    if (!sent) await this.lost(id, kind);
  }

  private async lost(id: string, kind: AgentRequestKind): Promise<void> {
    this.inFlight.delete(id);
    await this.answer(id, failed(kind, 'The agent disconnected before the request could be sent', 0));
  }

  /** Writes the answer (`result` or `settled`) once and wakes the caller if it waits here. */
  private async answer(id: string, set: Record<string, unknown>): Promise<void> {
    await this.o.db.agentRequests.updateOne({ _id: new Types.ObjectId(id), status: { $ne: 'done' } }, { $set: { status: 'done', ...set } });
    this.answered.notify(id);
  }
}

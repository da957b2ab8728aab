import WebSocket from 'ws';
import {
  AgentToServer, Backoff, CloseCodes, decodeRelayChunk, frame, MAX_FRAME_BYTES, parseMessage, ProtocolError, ServerToAgent, TERMINAL_CLOSE_CODES,
  type AgentMessage, type PayloadOf, type RelayChunk, type ServerMessage,
} from '@xfer/shared';
import type { Logger } from 'pino';
import { isDurable, Outbox } from './outbox.js';
import { DEFAULT_OUTBOX_MEMORY_BYTES } from '../config.js';
import { isHeldReport, ReportQueue } from './report-queue.js';
import { SocketRelayLink, type RelayLink } from './relay-link.js';

export type Hello = PayloadOf<typeof AgentToServer, 'hello'>;
export type Welcome = PayloadOf<typeof ServerToAgent, 'welcome'>;
/** Every server message but `welcome` and `ack`, which the session handles itself. */
export type SessionMessage = Exclude<ServerMessage, { type: 'welcome' | 'ack' }>;

export interface SessionOptions {
  /**
   * `ws(s)://…/api/v1/agents/connect`: one (a single instance, or several behind a load balancer),
   * or one per control-plane instance, dialed in turn starting from a random one (see the class doc).
   */
  url: string | readonly string[];
  token: string;
  /** The hello of each new connection (running jobs change between connections). */
  hello: () => Hello;
  /** The session is open; `welcome.abort_jobs` are for the caller to abort. */
  onWelcome: (welcome: Welcome) => void;
  /** Every validated message after `welcome`. */
  onMessage: (message: SessionMessage) => void;
  log: Logger;
  /** Reconnect backoff: first ceiling, cap (full jitter). Default 500 ms → 30 s. */
  reconnectBaseMs?: number;
  reconnectMaxMs?: number;
  /** A session that lasted this long after `welcome` resets the backoff. Default 30 s. */
  stableAfterMs?: number;
  /** Time allowed from dialing to `welcome`. Default 15 s. */
  handshakeTimeoutMs?: number;
  /** Jitter of the backoff, and the pick of the first URL. */
  random?: () => number;
  /**
   * Where held reports (job reports, `watch.found`) past `outboxMemoryBytes` wait for the control plane (this process's own
   * directory, see `spillDir`); null or absent: they stay in memory.
   */
  spillDir?: string | null;
  /** Memory bound of the reports held until acknowledged (default 8 MiB). */
  outboxMemoryBytes?: number;
  /**
   * Set: the agent plays relays (relay-protocol.ts). `hello` announces it, and on a session whose
   * welcome sets `relay` the binary frames go to `onChunk` (`relay.*` messages to `onMessage`
   * like any other); elsewhere both stay protocol errors.
   */
  relay?: { onChunk: (chunk: RelayChunk) => void };
}

/** How `run` ended: stopped by `stop()`, or refused for good by the control plane. */
export type SessionEnd = { kind: 'stopped' } | { kind: 'terminal'; code: number; reason: string };

interface Closed {
  code: number;
  reason: string;
  /** HTTP status when the upgrade itself was refused. */
  httpStatus?: number;
  welcomedAt?: number;
}

const TERMINAL_HTTP = new Set([401, 403]);
const CLOSE_WAIT_MS = 3000;
/**
 * Replies (`pong`, `connection.test.result`) are not queued past this many unsent bytes: the
 * control plane is not reading them. Everything else is always queued (reports must arrive).
 */
const MAX_UNREAD_BYTES = 2 * MAX_FRAME_BYTES;
const REPLIES: ReadonlySet<string> = new Set(['pong', 'connection.test.result', 'source.settle.result']);
/** The largest heartbeat the agent honours (one hour): the watchdog is a timer. */
const MAX_HEARTBEAT_MS = 3_600_000;

/**
 * The agent's WebSocket session with the control plane. It dials out (never listens), sends
 * `hello`, expects `welcome`, validates every frame, watches liveness, and reconnects with
 * exponential backoff and full jitter until stopped or refused for good (a terminal close code,
 * or HTTP 401/403 on the upgrade).
 *
 * `send` never fails. Job reports and `watch.found` are numbered and held (ReportQueue) until the control plane
 * acknowledges them, and every one not acknowledged goes out again after each `welcome`; with a
 * control plane that does not acknowledge (`welcome.acks` unset), a report is forgotten once
 * written to the socket. Rotated credentials wait in an outbox while disconnected; other messages
 * (replies to requests of a dead session) are dropped.
 *
 * The reconnect backoff is capped to a quarter of the job lease the last welcome announced: the
 * control plane fails a job whose agent stays away a whole lease (counted from when it is back).
 *
 * With several URLs (control-plane instances with no load balancer in front), the first dial goes
 * to a random one, so that agents spread over the instances, and every failed dial or lost session
 * moves to the next one, round the list, after the same backoff: an instance that died is left at
 * once, and any instance can hold the session (they share the database). A terminal refusal from
 * any of them ends the session: a token is refused by all alike.
 *
 * Relays (option `relay`): `hello` says the agent plays them; on a session whose welcome says so
 * too, binary frames are relay frames (decoded, handed to `relay.onChunk`) and `relayLink` is
 * that session's way to send relay messages and frames, ended with the session.
 */
export class AgentSession {
  private ws: WebSocket | null = null;
  private welcomed = false;
  private stopping = false;
  private wake: (() => void) | null = null;
  private readonly outbox = new Outbox();
  private readonly reports: ReportQueue;
  /** Whether the control plane of the current session acknowledges reports. */
  private serverAcks = false;
  private backoffCapMs = Number.POSITIVE_INFINITY;
  private readonly idle = new Set<() => void>();
  private readonly urls: readonly string[];
  /** Index in `urls` of the next dial. */
  private turn: number;
  /** Callers of `opened` waiting for the next welcome. */
  private readonly openWaiters = new Set<() => void>();
  /** The relays' link to the current session, when its welcome set `relay`. */
  private link: SocketRelayLink | null = null;

  constructor(private readonly o: SessionOptions) {
    this.urls = typeof o.url === 'string' ? [o.url] : [...o.url];
    if (this.urls.length === 0) throw new Error('AgentSession needs at least one URL');
    this.turn = Math.min(this.urls.length - 1, Math.floor((o.random ?? Math.random)() * this.urls.length));
    this.reports = new ReportQueue({ dir: o.spillDir ?? null, memoryBytes: o.outboxMemoryBytes ?? DEFAULT_OUTBOX_MEMORY_BYTES, log: o.log });
  }

  /** Connects and keeps connecting until `stop()` or a terminal refusal. */
  async run(): Promise<SessionEnd> {
    const backoff = new Backoff(this.o.reconnectBaseMs ?? 500, this.o.reconnectMaxMs ?? 30_000, this.o.random);
    while (!this.stopping) {
      const closed = await this.connectOnce();
      if (this.stopping) break;
      if (TERMINAL_CLOSE_CODES.includes(closed.code) || (closed.httpStatus !== undefined && TERMINAL_HTTP.has(closed.httpStatus))) {
        const reason = closed.httpStatus !== undefined ? `HTTP ${closed.httpStatus}` : describeClose(closed.code, closed.reason);
        this.o.log.error({ code: closed.code, http_status: closed.httpStatus, reason }, `the control plane refused this agent (${reason}); not reconnecting`);
        return { kind: 'terminal', code: closed.code, reason };
      }
      if (closed.welcomedAt !== undefined && Date.now() - closed.welcomedAt >= (this.o.stableAfterMs ?? 30_000)) backoff.reset();
      const delayMs = Math.min(backoff.next(), this.backoffCapMs);
      const url = this.urls[this.turn]!;
      this.turn = (this.turn + 1) % this.urls.length;
      this.o.log.warn({
        url, code: closed.code, http_status: closed.httpStatus, reason: closed.reason, retry_in_ms: delayMs,
        ...(this.urls.length > 1 ? { next_url: this.urls[this.turn] } : {}),
      }, 'disconnected from the control plane; reconnecting');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, delayMs);
        this.wake = () => { clearTimeout(timer); resolve(); };
      });
      this.wake = null;
    }
    return { kind: 'stopped' };
  }

  /** Sends now when the session is open; otherwise keeps what must not be lost (see class doc). */
  send(message: AgentMessage): void {
    if (isHeldReport(message)) {
      this.reports.add(message);
      this.pump();
      return;
    }
    const ws = this.ws;
    const open = ws !== null && this.welcomed && ws.readyState === WebSocket.OPEN;
    if (open && REPLIES.has(message.type) && ws.bufferedAmount > MAX_UNREAD_BYTES) {
      // A control plane that floods requests and does not read the replies gets no more of them.
      this.o.log.debug({ type: message.type, unread_bytes: ws.bufferedAmount }, 'control plane not reading: reply dropped');
    } else if (open) {
      ws.send(JSON.stringify(message), (err) => {
        if (err && isDurable(message)) this.outbox.put(message);
        this.checkIdle();
      });
    } else if (isDurable(message)) {
      this.outbox.put(message);
    } else {
      this.o.log.debug({ type: message.type }, 'not connected: message dropped');
    }
  }

  /**
   * Writes `message` to the open session now: true once written to its socket, false when no
   * session is open or the write failed. Nothing is held: the caller keeps what it must send again
   * (a plan's batches: jobs/plan-runner.ts, which waits for `opened` and sends them then).
   */
  write(message: AgentMessage): Promise<boolean> {
    const ws = this.ws;
    if (ws === null || !this.welcomed || ws.readyState !== WebSocket.OPEN) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      ws.send(JSON.stringify(message), (err) => {
        resolve(!err);
        this.checkIdle();
      });
    });
  }

  /** Resolves once a session is open (at once when one is), or rejects when `signal` aborts. */
  opened(signal: AbortSignal): Promise<void> {
    if (this.connected) return Promise.resolve();
    signal.throwIfAborted();
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        this.openWaiters.delete(done);
        reject(signal.reason as Error);
      };
      const done = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      this.openWaiters.add(done);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Whether the session is open (welcomed). */
  get connected(): boolean {
    return this.welcomed && this.ws?.readyState === WebSocket.OPEN;
  }

  /** The current session's link for relays; null when disconnected or when its welcome did not set `relay`. */
  get relayLink(): RelayLink | null {
    return this.link;
  }

  /**
   * Resolves once nothing waits to be sent (the outbox is empty and the socket's buffer drained),
   * or after `timeoutMs`. Used before closing at shutdown so the last reports get out.
   */
  async flushed(timeoutMs: number): Promise<boolean> {
    if (this.isIdle()) return true;
    let done: () => void = () => {};
    const idle = new Promise<boolean>((resolve) => { done = () => resolve(true); });
    this.idle.add(done);
    let timer: NodeJS.Timeout | undefined;
    const poll = setInterval(() => this.checkIdle(), 50);
    try {
      return await Promise.race([idle, new Promise<boolean>((resolve) => { timer = setTimeout(() => resolve(false), timeoutMs); })]);
    } finally {
      clearTimeout(timer);
      clearInterval(poll);
      this.idle.delete(done);
    }
  }

  /** Closes the socket with 1000 and stops reconnecting; `run` then resolves `stopped`. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.wake?.();
    this.reports.discard();
    const ws = this.ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => { ws.terminate(); resolve(); }, CLOSE_WAIT_MS);
      ws.once('close', () => { clearTimeout(timer); resolve(); });
      if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
      else ws.close(CloseCodes.normal, 'agent shutting down');
    });
  }

  private connectOnce(): Promise<Closed> {
    const { log } = this.o;
    const url = this.urls[this.turn]!;
    return new Promise<Closed>((resolve) => {
      const ws = new WebSocket(url, {
        headers: { authorization: `Bearer ${this.o.token}` },
        handshakeTimeout: this.o.handshakeTimeoutMs ?? 15_000,
        // Larger frames close the socket (1009) before they are buffered whole.
        maxPayload: MAX_FRAME_BYTES,
        // Text that is not UTF-8 is refused by parseMessage: a protocol error (4400) like any bad frame.
        skipUTF8Validation: true,
        perMessageDeflate: false,
        followRedirects: false,
      });
      this.ws = ws;
      let httpStatus: number | undefined;
      let lastError = '';
      let welcomedAt: number | undefined;
      let lastHeard = Date.now();
      let watchdog: NodeJS.Timeout | undefined;
      const welcomeTimer = setTimeout(() => this.protocolFailure(ws, 'no welcome from the control plane in time'), this.o.handshakeTimeoutMs ?? 15_000);

      ws.on('unexpected-response', (request, response) => {
        httpStatus = response.statusCode;
        response.resume();
        request.destroy();
        ws.terminate();
      });
      ws.on('open', () => {
        log.debug('connected; sending hello');
        ws.send(JSON.stringify(frame(AgentToServer, 'hello', this.helloPayload())));
      });
      ws.on('ping', () => { lastHeard = Date.now(); });
      ws.on('pong', () => { lastHeard = Date.now(); });
      ws.on('message', (data, isBinary) => {
        try {
          onFrame(data as Buffer, isBinary);
        } catch (err) {
          // Our bug, not the server's: this session ends (1011) and the agent reconnects; never the process.
          log.error({ err }, 'handling a message from the control plane failed; reconnecting');
          if (ws.readyState === WebSocket.OPEN) ws.close(1011, 'internal error');
          else ws.terminate();
        }
      });
      const onFrame = (data: Buffer, isBinary: boolean): void => {
        // Frames that arrive once the session is closing (after a bad frame) are dropped: it is over.
        if (ws.readyState !== WebSocket.OPEN) return;
        lastHeard = Date.now();
        if (isBinary) {
          if (!this.link || !this.o.relay) {
            this.protocolFailure(ws, 'unexpected binary frame');
            return;
          }
          let chunk: RelayChunk;
          try {
            chunk = decodeRelayChunk(data);
          } catch (err) {
            this.protocolFailure(ws, err instanceof ProtocolError ? err.message : 'invalid binary frame');
            return;
          }
          this.o.relay.onChunk(chunk);
          return;
        }
        let message: ServerMessage;
        try {
          message = parseMessage(ServerToAgent, data);
        } catch (err) {
          this.protocolFailure(ws, err instanceof ProtocolError ? err.message : 'invalid frame');
          return;
        }
        if (!this.welcomed) {
          if (message.type !== 'welcome') {
            this.protocolFailure(ws, `expected welcome, got ${message.type}`);
            return;
          }
          clearTimeout(welcomeTimer);
          this.welcomed = true;
          welcomedAt = Date.now();
          // Bounded: a timer longer than 2^31-1 ms fires at once (Node), which would spin.
          const heartbeatMs = Math.min(message.payload.heartbeat_ms, MAX_HEARTBEAT_MS);
          // A server silent for 3 heartbeats is gone (a dead NAT path never sends a close).
          watchdog = setInterval(() => {
            if (Date.now() - lastHeard > 3 * heartbeatMs) {
              log.warn({ silent_ms: Date.now() - lastHeard }, 'control plane silent for 3 heartbeats; dropping the connection');
              ws.terminate();
            }
          }, heartbeatMs);
          log.info({ url, agent_id: message.payload.agent_id, heartbeat_ms: heartbeatMs, abort_jobs: message.payload.abort_jobs.length }, 'connected to the control plane');
          this.serverAcks = message.payload.acks === true;
          this.backoffCapMs = Math.floor(message.payload.lease_ms / 4);
          if (this.o.relay && message.payload.relay === true) this.link = new SocketRelayLink(ws);
          this.o.onWelcome(message.payload);
          for (const queued of this.outbox.take()) this.send(queued);
          this.reports.unsendAll();
          this.pump();
          for (const done of [...this.openWaiters]) done();
          this.openWaiters.clear();
          return;
        }
        if (message.type === 'welcome') {
          this.protocolFailure(ws, 'welcome received twice');
          return;
        }
        if (message.type === 'ack') {
          this.reports.ack(message.payload.seqs);
          this.pump();
          this.checkIdle();
          return;
        }
        if (message.type.startsWith('relay.') && !this.link) {
          this.protocolFailure(ws, `${message.type} on a session without relays`);
          return;
        }
        this.o.onMessage(message);
      };
      ws.on('error', (err) => {
        // 'close' follows and drives the reconnect; the message never holds the token.
        lastError = err.message;
        log.debug({ err: err.message }, 'websocket error');
      });
      ws.on('close', (code, reason) => {
        clearTimeout(welcomeTimer);
        clearInterval(watchdog);
        if (this.ws === ws) this.ws = null;
        this.welcomed = false;
        // Every relay of this session is over: its path through the control plane is gone.
        this.link?.end(`the session with the control plane ended (close ${code})`);
        this.link = null;
        resolve({ code, reason: reason.toString('utf8') || lastError, httpStatus, welcomedAt });
      });
    });
  }

  /** A frame broke the protocol: close with 4400 (the run loop reconnects after backoff). */
  private protocolFailure(ws: WebSocket, reason: string): void {
    this.o.log.error({ reason }, 'protocol error from the control plane; closing the session');
    if (ws.readyState === WebSocket.OPEN) {
      ws.close(CloseCodes.protocolError, truncateReason(reason));
      setTimeout(() => ws.terminate(), CLOSE_WAIT_MS).unref();
    } else if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
    // CLOSING: the close already under way ends the session.
  }

  /** The caller's hello, with this session's part: acknowledgements wanted, jobs whose reports are held. */
  private helloPayload(): Hello {
    const held = this.reports.heldJobs().slice(0, 10_000);
    return { ...this.o.hello(), acks: true, ...(held.length > 0 ? { held_jobs: held } : {}), ...(this.o.relay ? { relay: true } : {}) };
  }

  /** Writes the held reports not yet written to the open session, in order. */
  private pump(): void {
    const ws = this.ws;
    if (!ws || !this.welcomed || ws.readyState !== WebSocket.OPEN) return;
    for (const held of this.reports.takeUnsent()) {
      ws.send(JSON.stringify(held.message), (err) => {
        // A failed write is sent again after the next welcome; without acks, a written one is done.
        if (!err && !this.serverAcks) {
          this.reports.ack([held.seq]);
          this.pump();
        }
        this.checkIdle();
      });
    }
  }

  private isIdle(): boolean {
    return this.outbox.size === 0 && this.reports.size === 0 && (this.ws?.bufferedAmount ?? 0) === 0;
  }

  private checkIdle(): void {
    if (this.idle.size > 0 && this.isIdle()) for (const done of [...this.idle]) done();
  }
}

/** A close reason is at most 123 bytes (RFC 6455 §5.5). */
function truncateReason(reason: string): string {
  let out = reason;
  while (Buffer.byteLength(out) > 123) out = out.slice(0, -1);
  return out;
}

function describeClose(code: number, reason: string): string {
  const name = code === CloseCodes.revoked ? 'token unknown or revoked'
    : code === CloseCodes.replaced ? 'another session of this agent replaced this one'
    : code === CloseCodes.unsupportedVersion ? 'protocol version not supported by the control plane'
    : `close code ${code}`;
  return reason ? `${name}: ${reason} (close ${code})` : `${name} (close ${code})`;
}

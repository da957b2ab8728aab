import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { WebSocket, RawData } from 'ws';
import {
  AgentToServer, CloseCodes, decodeRelayChunk, frame, MAX_FRAME_BYTES, parseMessage, ProtocolError, PROTOCOL_VERSION, ServerToAgent,
  type AgentMessage, type PayloadOf, type RelayChunk, type ServerToAgentType,
} from '@xfer/shared';
import { SocketPacer } from '../../../lib/socket-pacer.js';

export type Hello = PayloadOf<typeof AgentToServer, 'hello'>;
export type Welcome = PayloadOf<typeof ServerToAgent, 'welcome'>;
/** The relay messages an agent sends (relay-protocol.ts): `relay.credit`, `.entries`, `.want`, `.end`. */
export type AgentRelayMessage = Extract<AgentMessage, { type: `relay.${string}` }>;
/** Called once a send was handed to the operating system (or failed): what relays count their buffers by. */
export type Sent = (err?: Error) => void;

/** Who is on the other end: set by the connect route from the agent's token. */
export interface AgentIdentity {
  id: string;
  accountId: string;
  name: string;
}

/**
 * Where the relay traffic of a session goes (plugins/app/relay/ installs it through the hub).
 * Called synchronously, in the order the frames arrived, outside the queue of the session's other
 * messages: relays do no database work per frame, and their memory is bounded by their own
 * back-pressure (`hold`), not by that queue.
 */
export interface RelayTraffic {
  /** A `relay.*` message of a session whose hello and welcome set `relay`. */
  message(session: AgentSession, message: AgentRelayMessage): void;
  /** A binary relay frame of such a session: decoded, and the frame as it arrived (forwarded unchanged). */
  binary(session: AgentSession, chunk: RelayChunk, frame: Buffer): void;
  /** The session is over (closed by either side, or its socket dropped); called at once, maybe twice. */
  closed(session: AgentSession): void;
}

/** What the hub does with a session's traffic. Each is awaited in arrival order, but `relay`'s, which run at once. */
export interface SessionHandlers {
  /** Registers the session; the welcome to send, or null when the session was closed meanwhile. */
  hello(session: AgentSession, hello: Hello): Promise<Welcome | null>;
  message(session: AgentSession, message: Exclude<AgentMessage, { type: 'hello' | `relay.${string}` }>): Promise<void>;
  closed(session: AgentSession, code: number): Promise<void>;
  /** Null: this control plane relays nothing (the welcome does not offer it). */
  relay(): RelayTraffic | null;
}

export interface SessionOptions {
  heartbeatMs: number;
  helloTimeoutMs: number;
  log: FastifyBaseLogger;
  handlers: SessionHandlers;
}

/**
 * Frames, and their bytes, waiting for their handler before the socket stops reading
 * (back-pressure on a flooding agent): what a session holds of unhandled input is bounded by
 * these plus the frames of one network read (docs/architecture.md "Agents and jobs").
 */
const MAX_QUEUED = 64;
const MAX_QUEUED_BYTES = 2 * MAX_FRAME_BYTES;
/**
 * Bytes sent to the agent and not yet taken by its TCP stack: an agent this far behind does not
 * read its socket (each of its reports about a job it was never given earns a `job.cancel`), and
 * the socket is dropped rather than let the send buffer grow.
 */
const MAX_UNREAD_BYTES = 2 * MAX_FRAME_BYTES;
/** Why the queue of unhandled frames holds the socket (see `hold`). */
const QUEUE_HOLD = 'queue';
/**
 * Runs told to stop that one session remembers (`stopping`): a hello lists at most 10,000 running
 * jobs. Past it, a stop is still sent but not remembered (only an agent reporting on jobs it was
 * never given gets there).
 */
export const MAX_STOPPING = 10_000;
/** RFC 6455 limits a close reason to 123 bytes. */
const reason = (text: string) => Buffer.from(text).subarray(0, 123).toString('utf8').replace(/\uFFFD+$/, '');

/**
 * One agent's WebSocket: the session order (hello first, once), validation of every frame,
 * liveness (ping every `heartbeatMs`, drop after 3 silent intervals) and one-at-a-time
 * processing, so an agent's reports apply in the order it sent them.
 */
export class AgentSession {
  readonly sessionId = randomUUID();
  readonly connectedAt = new Date();
  /** Runs the socket's back-pressure (`hold`/`release`) and tells when the agent was last heard from. */
  private readonly pacer: SocketPacer;
  state: 'hello' | 'welcoming' | 'open' | 'closed' = 'hello';
  hello: Hello | null = null;
  /** Jobs this session runs, with the attempt it runs: reports apply to that run only. */
  readonly jobs = new Map<string, number>();
  /**
   * Of `jobs`, those the agent did not list in `hello` although it had them: it may have finished
   * them while disconnected (their reports follow the welcome) or lost them. Settled by the
   * resync ping (runs.ts).
   */
  readonly unconfirmed = new Set<string>();
  /** When unconfirmed jobs are settled even without the resync pong. */
  resyncDeadline = 0;
  /**
   * Runs told to stop (`job.cancel`, `abort_jobs`) whose end the agent has not reported yet, with
   * when: their late reports change nothing, and the job is not sent to this agent again until
   * the old run ended (reports carry no attempt, so the two runs could not be told apart).
   */
  readonly stopping = new Map<string, number>();
  /**
   * The session plays relays (its hello and our welcome both set `relay`): binary frames and
   * `relay.*` messages are part of it. For any other session they are protocol errors.
   */
  relay = false;
  /** Resolves once the socket is closed and the hub has cleaned up after it. */
  readonly closed: Promise<void>;

  private queue: Promise<void> = Promise.resolve();
  private queued = 0;
  private queuedBytes = 0;
  /** Unread bytes allowed past MAX_UNREAD_BYTES: the windows of the relays that send to this agent. */
  private unreadAllowance = 0;
  private readonly heartbeat: NodeJS.Timeout;
  private readonly helloTimer: NodeJS.Timeout;
  private resolveClosed!: () => void;

  constructor(private readonly socket: WebSocket, readonly agent: AgentIdentity, private readonly o: SessionOptions) {
    this.closed = new Promise((resolve) => (this.resolveClosed = resolve));
    this.pacer = new SocketPacer(socket);
    socket.on('message', (data, isBinary) => this.contained('handling a frame', () => this.onFrame(data, isBinary)));
    socket.on('close', (code) => void this.onClose(code));
    this.heartbeat = setInterval(() => this.contained('the heartbeat', () => {
      // While we hold the socket paused (back-pressure) its pongs are not read: that silence is
      // ours, not the agent's (SocketPacer). The pings still go out, so the agent hears from us.
      if (this.pacer.beat(3)) {
        o.log.info({ agentId: agent.id }, 'agent silent for 3 heartbeats: dropping its socket');
        socket.terminate();
      } else {
        socket.ping();
      }
    }), o.heartbeatMs);
    this.helloTimer = setTimeout(() => {
      if (this.state === 'hello') this.close(CloseCodes.protocolError, `expected hello within ${o.helloTimeoutMs} ms`);
    }, o.helloTimeoutMs);
  }

  get open(): boolean {
    return this.state === 'open';
  }

  /**
   * Sends a message; false when the socket is no longer open (the caller's job stays recoverable).
   * `sent`, when given, is called once the frame was handed to the operating system (or failed);
   * not called when this returns false.
   */
  send<T extends ServerToAgentType>(type: T, payload: PayloadOf<typeof ServerToAgent, T>, sent?: Sent): boolean {
    if (!this.writable()) return false;
    this.socket.send(JSON.stringify(frame(ServerToAgent, type, payload)), sent);
    return true;
  }

  /** Sends a binary relay frame as it is (see `send` for the result and `sent`). */
  sendBinary(data: Buffer, sent?: Sent): boolean {
    if (!this.writable()) return false;
    this.socket.send(data, { binary: true }, sent);
    return true;
  }

  /**
   * Lets `bytes` more stay unread by the agent before it counts as not reading (a relay's
   * window, while the relay sends to it); the returned function takes the allowance back.
   */
  allowUnread(bytes: number): () => void {
    this.unreadAllowance += bytes;
    let taken = false;
    return () => {
      if (taken) return;
      taken = true;
      this.unreadAllowance -= bytes;
    };
  }

  /** Stops reading the socket until every holder released it (back-pressure). */
  hold(reason: string): void {
    this.pacer.hold(reason);
  }

  /** Releases `reason`'s hold on the socket (see `hold`). */
  release(reason: string): void {
    this.pacer.release(reason);
  }

  /** When the agent was last heard from (a frame, a ping, a pong): what its leases and `last_seen_at` count from. */
  get lastHeardAt(): Date {
    return new Date(this.pacer.lastHeardAt);
  }

  /** Open, and the agent reads what it was sent: an agent this far behind is dropped. */
  private writable(): boolean {
    if (this.state === 'closed' || this.socket.readyState !== this.socket.OPEN) return false;
    if (this.socket.bufferedAmount > MAX_UNREAD_BYTES + this.unreadAllowance) {
      this.o.log.warn({ agentId: this.agent.id, unread_bytes: this.socket.bufferedAmount }, 'agent does not read its socket: dropping it');
      this.terminate();
      return false;
    }
    return true;
  }

  /** Remembers a run told to stop (see `stopping`); false when the session remembers too many already. */
  markStopping(jobId: string): boolean {
    if (this.stopping.size >= MAX_STOPPING && !this.stopping.has(jobId)) return false;
    this.stopping.set(jobId, Date.now());
    return true;
  }

  close(code: number, text: string): void {
    if (this.state === 'closed') return;
    this.o.log.info({ agentId: this.agent.id, code, reason: text }, 'closing agent socket');
    this.socket.close(code, reason(text));
    // Frames that arrive after this point are dropped: the session is over.
    this.state = 'closed';
    // Its relays end now, not when the closing handshake is over (that may take the peer a while).
    this.endRelays();
  }

  /** Tells the relays this session is over (they end, and their other sides are told). */
  private endRelays(): void {
    try {
      this.o.handlers.relay()?.closed(this);
    } catch (err) {
      this.o.log.error({ err, agentId: this.agent.id }, 'ending the relays of an agent session failed');
    }
  }

  /** Ends the socket without a closing handshake (the peer is unresponsive). */
  terminate(): void {
    this.socket.terminate();
  }

  /**
   * Runs a socket or timer callback so that nothing it throws escapes into the EventEmitter or
   * the timer (which would end the process, every tenant's sessions with it): a failure ends
   * this session only, with 1011.
   */
  private contained(what: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.o.log.error({ err, agentId: this.agent.id }, `agent session: ${what} failed`);
      this.close(1011, 'internal error');
      this.terminate();
    }
  }

  private onFrame(data: RawData, isBinary: boolean): void {
    if (this.state === 'closed') return;
    this.pacer.heard();
    const raw = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
    if (isBinary) return this.onBinary(raw);
    let message: AgentMessage;
    try {
      message = parseMessage(AgentToServer, raw);
    } catch (err) {
      if (!(err instanceof ProtocolError)) {
        // A validator failing on some input is our bug, not the agent's: this session ends, nothing else.
        this.o.log.error({ err, agentId: this.agent.id }, 'validating a frame from an agent failed');
        return this.close(1011, 'internal error while validating a frame');
      }
      if (this.state === 'hello' && otherVersion(raw)) {
        return this.close(CloseCodes.unsupportedVersion, `protocol version ${PROTOCOL_VERSION} is required`);
      }
      this.o.log.warn({ agentId: this.agent.id, problem: err.message }, 'invalid frame from agent');
      return this.close(CloseCodes.protocolError, err.message);
    }
    if (message.type === 'hello') {
      if (this.state !== 'hello') return this.close(CloseCodes.protocolError, 'hello sent twice');
      clearTimeout(this.helloTimer);
      this.state = 'welcoming';
      this.hello = message.payload;
      const hello = message.payload;
      return this.enqueue(raw.length, async () => {
        const welcome = await this.o.handlers.hello(this, hello);
        if (welcome && this.state === 'welcoming' && this.send('welcome', welcome)) {
          this.state = 'open';
          this.relay = hello.relay === true && welcome.relay === true;
        }
      });
    }
    if (this.state === 'hello') return this.close(CloseCodes.protocolError, `expected hello, got ${message.type}`);
    if (isRelayMessage(message)) {
      const relays = this.relay && this.state === 'open' ? this.o.handlers.relay() : null;
      if (!relays) return this.close(CloseCodes.protocolError, `${message.type} is not part of this session`);
      return relays.message(this, message);
    }
    this.enqueue(raw.length, () => this.o.handlers.message(this, message as Exclude<AgentMessage, { type: 'hello' | `relay.${string}` }>));
  }

  /** A binary frame: relay bytes (relay-protocol.ts), only from a session that relays. */
  private onBinary(raw: Buffer): void {
    const relays = this.relay && this.state === 'open' ? this.o.handlers.relay() : null;
    if (!relays) return this.close(CloseCodes.protocolError, 'binary frames are not part of this session');
    let chunk: RelayChunk;
    try {
      chunk = decodeRelayChunk(raw);
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
      this.o.log.warn({ agentId: this.agent.id, problem: err.message }, 'invalid binary frame from agent');
      return this.close(CloseCodes.protocolError, err.message);
    }
    relays.binary(this, chunk, raw);
  }

  private enqueue(bytes: number, task: () => Promise<void>): void {
    this.queued++;
    this.queuedBytes += bytes;
    if (this.queued > MAX_QUEUED || this.queuedBytes > MAX_QUEUED_BYTES) this.hold(QUEUE_HOLD);
    this.queue = this.queue
      .then(() => (this.state === 'closed' ? undefined : task()))
      .catch((err: unknown) => {
        this.o.log.error({ err, agentId: this.agent.id }, 'handling an agent message failed');
        // The agent reconnects and says which jobs it still runs; nothing is half-applied.
        this.close(1011, 'internal error while handling a message');
      })
      .finally(() => {
        this.queued--;
        this.queuedBytes -= bytes;
        if (this.queued <= MAX_QUEUED / 2 && this.queuedBytes <= MAX_QUEUED_BYTES / 2) this.release(QUEUE_HOLD);
      });
  }

  private async onClose(code: number): Promise<void> {
    this.state = 'closed';
    clearInterval(this.heartbeat);
    clearTimeout(this.helloTimer);
    this.endRelays();
    try {
      await this.queue;
      await this.o.handlers.closed(this, code);
    } catch (err) {
      this.o.log.warn({ err, agentId: this.agent.id }, 'cleanup after an agent disconnect failed');
    } finally {
      this.resolveClosed();
    }
  }
}

const isRelayMessage = (m: AgentMessage): m is AgentRelayMessage => m.type.startsWith('relay.');

/** True when a frame that failed validation announces a protocol version other than ours. */
function otherVersion(raw: Buffer): boolean {
  try {
    const v = (JSON.parse(raw.toString('utf8')) as { v?: unknown }).v;
    return typeof v === 'number' && v !== PROTOCOL_VERSION;
  } catch {
    return false;
  }
}

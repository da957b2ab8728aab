import type { FastifyBaseLogger } from 'fastify';
import WebSocket, { type RawData } from 'ws';
import {
  AgentToServer, decodeRelayChunk, frame, MAX_FRAME_BYTES, parseMessage, ProtocolError, type RelayChunk,
} from '@xfer/shared';
import type { AgentRelayMessage, Sent } from '../agents/index.js';
import { CONTROL_PIPE_BYTES, DATA_PIPE_BYTES, type Farewell, type Forwarded, type Notice, type RelayEnd } from './ends.js';
import { SocketPacer } from '../../../lib/socket-pacer.js';

/**
 * Close codes of a peer link, read by the host when its link closes: `normal` after the source's
 * `relay.end`, `failed` fails the job (the relay cannot run, or the side there broke the
 * protocol), anything else means the other side is lost, and the job is taken over. A `relay.end`
 * sent over a link before its close carries the full error (a close reason holds 123 bytes).
 */
export const LinkCloseCodes = {
  normal: 1000,
  goingAway: 1001,
  protocolError: 4400,
  /** A link for that relay is already open at the peer, or the token was used before. */
  duplicate: 4409,
  /** The agent of the relay's side at the closing instance is gone (disconnected, not there). */
  lost: 4410,
  /** The relay cannot go on for a reason a takeover would not cure (the reason says which). */
  failed: 4422,
} as const;

/** The path of the internal route (routes/relays/) other instances dial. */
export const LINK_PATH = '/internal/relay-link';
/** Past this many unread bytes the other instance is not reading the link: it is dropped (lost). */
const MAX_UNREAD_BYTES = DATA_PIPE_BYTES + CONTROL_PIPE_BYTES + MAX_FRAME_BYTES;
const DIAL_TIMEOUT_MS = 10_000;
/** RFC 6455 limits a close reason to 123 bytes. */
const reasonOf = (text: string) => Buffer.from(text).subarray(0, 123).toString('utf8').replace(/\uFFFD+$/, '');

/** The `ws://`/`wss://` URL of an instance's link route, from its advertised URL. */
export function linkUrl(instanceUrl: string): string {
  return `${instanceUrl.replace(/^http/, 'ws')}${LINK_PATH}`;
}

/** How a link ended: its close code and reason, the `relay.end` that came before it, the HTTP status of a refused dial. */
export interface LinkEnding {
  code: number;
  reason: string;
  notice: Notice | null;
  refusal: number | null;
}

/**
 * What a link tells its relay. Messages and frames arrive validated and about the link's relay;
 * a `relay.end` arrives with the close that follows it (`closed`), whose code says what it means.
 */
export interface LinkHandlers {
  /** The dialled link is open (host side). */
  opened?(): void;
  message(message: Exclude<AgentRelayMessage, { type: 'relay.end' }>): void;
  binary?(chunk: RelayChunk, frame: Buffer): void;
  /** The link closed. Called once. */
  closed(ending: LinkEnding): void;
}

export interface PeerLinkOptions {
  jobId: string;
  attempt: number;
  /** The relay message types the other instance may send over this link. */
  accepts: ReadonlySet<string>;
  heartbeatMs: number;
  log: FastifyBaseLogger;
  label: string;
}

/**
 * A WebSocket between two instances carrying one relay (docs/architecture.md "Relays"): the host
 * dials the instance that holds the source agent's socket (`PeerLink.dial`), which accepts it on
 * its internal route. Frames are the agents' own relay frames, forwarded unchanged and validated
 * on arrival as the agents' are (a bad one closes the link with 4400). Liveness by ping, as for
 * agents; back-pressure by not reading (`hold`), as for agents.
 */
export class PeerLink implements RelayEnd {
  readonly label: string;
  private readonly pacer: SocketPacer;
  private heartbeat: NodeJS.Timeout | null = null;
  private refusal: number | null = null;
  private notice: Notice | null = null;
  private done = false;

  constructor(private readonly socket: WebSocket, private readonly o: PeerLinkOptions, private readonly handlers: LinkHandlers) {
    this.label = o.label;
    this.pacer = new SocketPacer(socket);
    socket.on('message', (data, isBinary) => this.contained(() => this.onFrame(data, isBinary)));
    socket.on('error', (err) => o.log.warn({ err: err.message, link: o.label }, 'relay peer link error'));
    socket.on('close', (code, reason) => this.onClose(code, reason.toString()));
    if (socket.readyState === WebSocket.OPEN) this.startHeartbeat();
    else socket.once('open', () => this.contained(() => {
      this.startHeartbeat();
      handlers.opened?.();
    }));
  }

  /** Dials `instanceUrl`'s link route with `token` (sent as a bearer header, never in the URL). */
  static dial(instanceUrl: string, token: string, o: PeerLinkOptions, handlers: LinkHandlers): PeerLink {
    const socket = new WebSocket(linkUrl(instanceUrl), {
      headers: { authorization: `Bearer ${token}` },
      perMessageDeflate: false,
      maxPayload: MAX_FRAME_BYTES,
      skipUTF8Validation: true,
      handshakeTimeout: DIAL_TIMEOUT_MS,
    });
    const link = new PeerLink(socket, o, handlers);
    socket.once('unexpected-response', (_request, response) => {
      link.refusal = response.statusCode ?? 0;
      response.resume();
      // Ends the handshake with 'error' and 'close' (destroying the request alone emits neither).
      socket.terminate();
    });
    return link;
  }

  get open(): boolean {
    return !this.done && this.socket.readyState === WebSocket.OPEN;
  }

  send<T extends keyof Forwarded>(type: T, payload: Forwarded[T], sent: Sent): boolean {
    if (!this.writable()) return false;
    this.socket.send(JSON.stringify(frame(AgentToServer, type, payload as never)), sent);
    return true;
  }

  sendBinary(data: Buffer, sent: Sent): boolean {
    if (!this.writable()) return false;
    this.socket.send(data, { binary: true }, sent);
    return true;
  }

  hold(reason: string): void {
    this.pacer.hold(reason);
  }

  release(reason: string): void {
    this.pacer.release(reason);
  }

  finish(farewell: Farewell): void {
    if (this.done) return;
    this.done = true;
    if (this.socket.readyState === WebSocket.CONNECTING) return this.socket.terminate();
    if (this.socket.readyState !== WebSocket.OPEN) return;
    if (farewell.notice) this.socket.send(JSON.stringify(frame(AgentToServer, 'relay.end', farewell.notice)));
    this.socket.close(farewell.code, reasonOf(farewell.reason));
  }

  /** Ends the link at once, without a closing handshake (tests: a link cut by the network). */
  terminate(): void {
    this.socket.terminate();
  }

  private writable(): boolean {
    if (this.done || this.socket.readyState !== WebSocket.OPEN) return false;
    if (this.socket.bufferedAmount > MAX_UNREAD_BYTES) {
      this.o.log.warn({ link: this.label, unread_bytes: this.socket.bufferedAmount }, 'the other instance does not read the relay link: dropping it');
      this.socket.terminate();
      return false;
    }
    return true;
  }

  private startHeartbeat(): void {
    this.pacer.heard();
    this.heartbeat = setInterval(() => this.contained(() => {
      // Silence while we do not read (back-pressure) is ours, as for agent sessions (SocketPacer).
      if (this.pacer.beat(3)) {
        this.o.log.info({ link: this.label }, 'relay peer link silent for 3 heartbeats: dropping it');
        this.socket.terminate();
      } else if (this.socket.readyState === WebSocket.OPEN) {
        this.socket.ping();
      }
    }), this.o.heartbeatMs);
  }

  private onFrame(data: RawData, isBinary: boolean): void {
    if (this.done) return;
    this.pacer.heard();
    const raw = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
    try {
      if (isBinary) {
        if (!this.handlers.binary) throw new ProtocolError('binary frames do not flow this way');
        const chunk = decodeRelayChunk(raw);
        this.check(chunk.jobId, chunk.attempt);
        return this.handlers.binary(chunk, raw);
      }
      const message = parseMessage(AgentToServer, raw);
      if (!this.o.accepts.has(message.type)) throw new ProtocolError(`${message.type} does not flow this way`);
      const relayed = message as AgentRelayMessage;
      this.check(relayed.payload.job_id, relayed.payload.attempt);
      if (relayed.type !== 'relay.end') return this.handlers.message(relayed);
      // Its meaning comes with the close that follows (normal end, lost, failed).
      this.notice ??= relayed.payload;
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
      this.o.log.warn({ link: this.label, problem: err.message }, 'invalid frame on a relay peer link');
      this.done = true;
      this.socket.close(LinkCloseCodes.protocolError, reasonOf(err.message));
    }
  }

  private check(jobId: string, attempt: number): void {
    if (jobId !== this.o.jobId || attempt !== this.o.attempt) throw new ProtocolError(`frame about another relay than job ${this.o.jobId} attempt ${this.o.attempt}`);
  }

  private onClose(code: number, reason: string): void {
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    this.done = true;
    this.contained(() => this.handlers.closed({ code, reason, notice: this.notice, refusal: this.refusal }));
  }

  /** Nothing a link's handler throws reaches the socket's EventEmitter (which would end the process). */
  private contained(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.o.log.error({ err, link: this.label }, 'relay peer link: handling failed');
      this.done = true;
      this.socket.terminate();
    }
  }
}

import WebSocket from 'ws';
import { RELAY_CHUNK_BYTES, type AgentMessage } from '@xfer/shared';

/**
 * Bytes the socket may hold unsent before a relay's next binary frame waits for it to drain. The
 * credit a destination grants bounds a relay's bytes in flight anyway; this keeps the socket's
 * own buffer short, so job reports and pongs queued behind relay frames go out soon.
 */
export const RELAY_SEND_MARK_BYTES = 4 * RELAY_CHUNK_BYTES;

/**
 * The relays' way onto one session with the control plane (relay-protocol.ts): relay messages
 * and binary frames go out on that session only, never on a later one, and `signal` says when it
 * ended (then every relay of it is over: its path through the control plane is gone).
 */
export interface RelayLink {
  /** Aborted, with the reason, when the session this link belongs to ended. */
  readonly signal: AbortSignal;
  /** Sends one relay message on this session; dropped once the session ended. */
  send(message: AgentMessage): void;
  /**
   * Sends one binary relay frame. Resolves at once while the socket holds less than
   * `RELAY_SEND_MARK_BYTES` unsent, else once this frame was written out; rejects when the
   * session ended. `written`, when given, is called once the frame was handed to the operating
   * system (or the send failed): from then on the link holds nothing of `frame`, which may be
   * reused.
   */
  sendFrame(frame: Buffer, written?: () => void): Promise<void>;
}

/** The RelayLink of one WebSocket session (session.ts makes one per welcome that set `relay`). */
export class SocketRelayLink implements RelayLink {
  private readonly controller = new AbortController();

  constructor(private readonly ws: WebSocket) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  send(message: AgentMessage): void {
    if (this.open) this.ws.send(JSON.stringify(message));
  }

  sendFrame(frame: Buffer, written?: () => void): Promise<void> {
    if (!this.open) return Promise.reject(this.ended());
    return new Promise<void>((resolve, reject) => {
      const { signal } = this.controller;
      const onEnd = () => reject(this.ended());
      this.ws.send(frame, { binary: true }, () => {
        signal.removeEventListener('abort', onEnd);
        written?.();
        // An error here closes the socket: the session's close handler ends the link.
        resolve();
      });
      if (this.ws.bufferedAmount < RELAY_SEND_MARK_BYTES) resolve();
      else signal.addEventListener('abort', onEnd, { once: true });
    });
  }

  /** The session ended: relays on this link are over. */
  end(reason: string): void {
    this.controller.abort(new Error(reason));
  }

  private get open(): boolean {
    return !this.controller.signal.aborted && this.ws.readyState === WebSocket.OPEN;
  }

  private ended(): Error {
    return (this.controller.signal.reason as Error | undefined) ?? new Error('the session with the control plane ended');
  }
}

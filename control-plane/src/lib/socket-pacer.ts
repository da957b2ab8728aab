import type { WebSocket } from 'ws';

/**
 * Back-pressure and liveness of a WebSocket the control plane reads: an agent's session
 * (plugins/app/agents/session.ts) and a relay link between instances (plugins/app/relay/peer-link.ts).
 *
 * Back-pressure is not reading: each reason to stop (the queue of unhandled frames, a relay whose
 * other side is behind) holds the socket, and it is read again once every holder released it.
 * Liveness is hearing from the peer (a frame, a ping, a pong) between our pings: `beat`, called
 * once a heartbeat before each ping, counts the pings in a row the peer let pass unheard. It
 * counts pings, not milliseconds, so a stall of our own event loop (a long GC, a saturated
 * machine) that delays the pings and the reading of the answers is not the peer's silence.
 * Silence while we hold the socket paused is ours too (its pongs are not read then): it never
 * counts while paused, and counts again only from the resume.
 */
export class SocketPacer {
  private readonly holds = new Set<string>();
  private resumedAt = 0;
  /** When the peer was last heard from (ms since the epoch). */
  lastHeardAt = Date.now();
  private pingedAt = this.lastHeardAt;
  private unanswered = 0;

  constructor(private readonly socket: WebSocket) {
    socket.on('pong', () => this.heard());
    socket.on('ping', () => this.heard());
  }

  /** The peer was heard from now (a frame arrived; pings and pongs are seen by the constructor's listeners). */
  heard(): void {
    this.lastHeardAt = Date.now();
  }

  /** Stops reading the socket until every holder released it. */
  hold(reason: string): void {
    this.holds.add(reason);
    if (!this.socket.isPaused) this.socket.pause();
  }

  /** Releases `reason`'s hold; the socket is read again when it was the last. */
  release(reason: string): void {
    if (!this.holds.delete(reason) || this.holds.size > 0 || !this.socket.isPaused) return;
    this.resumedAt = Date.now();
    this.socket.resume();
  }

  /**
   * One heartbeat, before the caller pings: true once the peer let `beats` pings in a row pass
   * without a word (it is gone: drop it), false otherwise (ping it).
   */
  beat(beats: number): boolean {
    const now = Date.now();
    if (this.socket.isPaused || Math.max(this.lastHeardAt, this.resumedAt) >= this.pingedAt) this.unanswered = 0;
    else this.unanswered++;
    this.pingedAt = now;
    return this.unanswered >= beats;
  }
}

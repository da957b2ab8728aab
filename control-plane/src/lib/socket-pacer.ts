import type { WebSocket } from 'ws';

/**
 * Back-pressure and liveness of a WebSocket the control plane reads: an agent's session
 * (plugins/app/agents/session.ts) and a relay link between instances (plugins/app/relay/peer-link.ts).
 *
 * Back-pressure is not reading: each reason to stop (the queue of unhandled frames, a relay whose
 * other side is behind) holds the socket, and it is read again once every holder released it.
 * Liveness is hearing from the peer (a frame, a ping, a pong): `silentFor` says it has not been
 * heard from for that long. Silence while we hold the socket paused is ours, not the peer's (its
 * pongs are not read then), so it counts again only from the resume, and never while paused.
 */
export class SocketPacer {
  private readonly holds = new Set<string>();
  private resumedAt = 0;
  /** When the peer was last heard from (ms since the epoch). */
  lastHeardAt = Date.now();

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

  /** The peer has not been heard from for more than `ms` that were its own to speak in. */
  silentFor(ms: number): boolean {
    return !this.socket.isPaused && Date.now() - Math.max(this.lastHeardAt, this.resumedAt) > ms;
  }
}

import { MAX_FRAME_BYTES, RELAY_WINDOW_BYTES, type AgentToServer, type PayloadOf, type ServerToAgent } from '@xfer/shared';
import type { AgentSession, Sent } from '../agents/index.js';

/**
 * What one instance holds in flight of one relay, per direction (docs/architecture.md "Relays"):
 * toward the destination, the window's bytes plus one listing frame; toward the source, two of the
 * destination's frames (its wants are not credited). Past it the sending side is not read until
 * half of it was handed to the operating system.
 */
export const DATA_PIPE_BYTES = RELAY_WINDOW_BYTES + MAX_FRAME_BYTES;
export const CONTROL_PIPE_BYTES = 2 * MAX_FRAME_BYTES;
/** Frames in flight per direction, whatever their size (a frame costs memory beyond its bytes). */
export const PIPE_FRAMES = 1024;

/**
 * The relay messages that travel between the sides, by type. `relay.sent` goes only as far as the
 * instance hosting the relay (over a peer link, never to an agent).
 */
export type Forwarded = {
  [T in 'relay.credit' | 'relay.want' | 'relay.entries' | 'relay.sent' | 'relay.end']: PayloadOf<typeof AgentToServer, T>;
};
/** The forwarded messages an agent receives. */
type ToAgent = Exclude<keyof Forwarded, 'relay.sent'>;
export type Notice = Forwarded['relay.end'];

/**
 * How a side learns that the relay is over: `relay.end` (`notice`; none for a side that ended the
 * relay itself or is gone), and for a link, the close code and reason that follow it
 * (peer-link.ts LinkCloseCodes: what the host does with the job).
 */
export interface Farewell {
  notice: Notice | null;
  code: number;
  reason: string;
}

/**
 * One side of a relay on this instance: the agent's session here, or the link to the instance
 * holding it (peer-link.ts). Relay (relay.ts) forwards between two of them.
 */
export interface RelayEnd {
  /** For messages and logs: `agent <name>` or `the link to <instance>`; never a secret. */
  readonly label: string;
  send<T extends keyof Forwarded>(type: T, payload: Forwarded[T], sent: Sent): boolean;
  /** The `relay.source` frame (only to a source agent here: credentials never cross a link). */
  sendSource?(payload: PayloadOf<typeof ServerToAgent, 'relay.source'>): boolean;
  sendBinary(frame: Buffer, sent: Sent): boolean;
  /** Stops, and resumes, reading what this side sends (back-pressure; see Pipe). */
  hold(reason: string): void;
  release(reason: string): void;
  /** The relay is over for this side: says goodbye as told and gives back what it took. */
  finish(farewell: Farewell): void;
}

/** An agent's session on this instance as a side of a relay. */
export class SessionEnd implements RelayEnd {
  readonly label: string;
  private readonly giveBack: () => void;

  /** `unread`: what the relay may leave unread by this agent (its pipe toward it, and one frame). */
  constructor(readonly session: AgentSession, unread: number) {
    this.label = `agent ${session.agent.name}`;
    this.giveBack = session.allowUnread(unread + MAX_FRAME_BYTES);
  }

  send<T extends keyof Forwarded>(type: T, payload: Forwarded[T], sent: Sent): boolean {
    // Relay (relay.ts) records `relay.sent` on the host; reaching an agent would be a bug: not sent.
    if (type === 'relay.sent') return false;
    return this.session.send(type as ToAgent, payload as never, sent);
  }

  sendSource(payload: PayloadOf<typeof ServerToAgent, 'relay.source'>): boolean {
    return this.session.send('relay.source', payload);
  }

  sendBinary(frame: Buffer, sent: Sent): boolean {
    return this.session.sendBinary(frame, sent);
  }

  hold(reason: string): void {
    this.session.hold(reason);
  }

  release(reason: string): void {
    this.session.release(reason);
  }

  finish(farewell: Farewell): void {
    if (farewell.notice) this.session.send('relay.end', farewell.notice);
    this.giveBack();
  }
}

/**
 * The accounting of one direction of a relay on this instance: bytes and frames sent on and not
 * yet handed to the operating system. Past the bound the side that sends (`origin`) is held; it is
 * released once half has gone out. This, with the credit the destination grants, is what bounds
 * the memory of a relay whose receiving side does not read.
 */
export class Pipe {
  private bytes = 0;
  private frames = 0;
  private holding: RelayEnd | null = null;

  constructor(private readonly reason: string, private readonly maxBytes: number, private readonly maxFrames = PIPE_FRAMES) {}

  /** Bytes in flight in this direction. */
  get inFlight(): number {
    return this.bytes;
  }

  /** Frames in flight in this direction. */
  get framesInFlight(): number {
    return this.frames;
  }

  /** Counts a frame of `size` bytes about to be sent by `origin`'s message; returns the send's callback. */
  carry(origin: RelayEnd, size: number): Sent {
    this.bytes += size;
    this.frames++;
    if (!this.holding && (this.bytes > this.maxBytes || this.frames > this.maxFrames)) {
      this.holding = origin;
      origin.hold(this.reason);
    }
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.bytes -= size;
      this.frames--;
      if (this.holding && this.bytes <= this.maxBytes / 2 && this.frames <= this.maxFrames / 2) this.stop();
    };
  }

  /** Releases the held side (the relay ended, or the pipe drained). */
  stop(): void {
    const held = this.holding;
    this.holding = null;
    held?.release(this.reason);
  }
}

import { MAX_RELAY_ENTRIES, RELAY_WINDOW_BYTES, type RelayChunk } from '@xfer/shared';
import type { AgentRelayMessage, Sent } from '../agents/index.js';
import { CONTROL_PIPE_BYTES, DATA_PIPE_BYTES, Pipe, type Farewell, type Forwarded, type Notice, type RelayEnd } from './ends.js';
import { LinkCloseCodes } from './peer-link.js';

export type Side = 'destination' | 'source';

/** How a relay ended; what the host then does with the job is RelayService's (relay.service.ts). */
export type RelayOutcome =
  /** A side sent `relay.end` (with an error: it failed or was cancelled); the other side is told as it was. */
  | { kind: 'ended'; by: Side; notice: Notice }
  /** The run ended or was stopped (completed, failed, cancelled, taken over, deleted): both sides are told. */
  | { kind: 'stopped'; error: string }
  /**
   * A side's agent, socket, link or instance is gone (null: this instance is going away): the
   * other side is told, and the host takes the job over.
   */
  | { kind: 'lost'; side: Side | null; error: string }
  /** A side broke the relay protocol (credit, order), or the relay cannot run: both are told, the host fails the job. */
  | { kind: 'failed'; side: Side | null; error: string };

export interface RelayOptions {
  jobId: string;
  attempt: number;
  /** `host`: this instance sent the destination its `job.assign`; `peer`: it holds the source agent for a host. */
  role: 'host' | 'peer';
  /** Called once, when the relay ended, after both sides were told. */
  onEnd(relay: Relay, outcome: RelayOutcome): void;
  /** Payload bytes forwarded toward the destination (the host counts them as relayed). */
  forwarded(bytes: number): void;
  /**
   * Host only: records what the source vouched for (`relay.sent`, relay/vouched.ts). A peer has
   * none: it passes `relay.sent` over the link to the host unchanged.
   */
  vouched?(files: Forwarded['relay.sent']['files']): Promise<void>;
}

const textSize = (payload: unknown) => Buffer.byteLength(JSON.stringify(payload)) + 64;

/**
 * One relay (job, attempt) on one instance, between its two sides (ends.ts: an agent's session
 * here, or the peer link to the instance holding it): forwards what each side may send to the
 * other, checks the credit the destination granted against what the source sends, and bounds what
 * is in flight in each direction (Pipe). The same on the host and on a peer, so every hop checks.
 */
export class Relay {
  readonly key: string;
  readonly jobId: string;
  readonly attempt: number;
  readonly role: 'host' | 'peer';
  destination: RelayEnd | null = null;
  source: RelayEnd | null = null;
  outcome: RelayOutcome | null = null;
  private readonly granted = { entries: 0, bytes: 0 };
  private readonly received = { entries: 0, bytes: 0 };
  /** Files the destination wanted, and files the source vouched for (never more than wanted). */
  private wanted = 0;
  private vouchedFor = 0;
  /** Of `granted`, what was passed on to the source (credit arriving before it was attached waits here). */
  private readonly passed = { entries: 0, bytes: 0 };
  private readonly toDestination: Pipe;
  private readonly toSource: Pipe;

  constructor(private readonly o: RelayOptions) {
    this.jobId = o.jobId;
    this.attempt = o.attempt;
    this.role = o.role;
    this.key = `${o.jobId}:${o.attempt}`;
    this.toDestination = new Pipe(`relay ${this.key} toward its destination`, DATA_PIPE_BYTES);
    this.toSource = new Pipe(`relay ${this.key} toward its source`, CONTROL_PIPE_BYTES);
  }

  get over(): boolean {
    return this.outcome !== null;
  }

  /** Bytes of this relay this instance holds in flight, both directions. */
  get inFlight(): number {
    return this.toDestination.inFlight + this.toSource.inFlight;
  }

  /** Frames of this relay this instance holds in flight, both directions. */
  get framesInFlight(): number {
    return this.toDestination.framesInFlight + this.toSource.framesInFlight;
  }

  attachDestination(end: RelayEnd): void {
    this.destination = end;
  }

  /** The source side is ready (`relay.source` went out, or the link is open): credit granted so far follows. */
  attachSource(end: RelayEnd): void {
    this.source = end;
    if (this.over) return end.finish(this.farewell('source'));
    const entries = this.granted.entries - this.passed.entries;
    const bytes = this.granted.bytes - this.passed.bytes;
    if (entries > 0 || bytes > 0) this.passCredit(entries, bytes);
  }

  /** `relay.credit`, `relay.want` or `relay.end` of the destination side. */
  fromDestination(message: AgentRelayMessage): void {
    if (this.over) return;
    const who = this.destination!.label;
    switch (message.type) {
      case 'relay.credit': {
        const { entries, bytes } = message.payload;
        this.granted.entries += entries;
        this.granted.bytes += bytes;
        if (this.granted.entries - this.received.entries > MAX_RELAY_ENTRIES || this.granted.bytes - this.received.bytes > RELAY_WINDOW_BYTES) {
          return this.end({ kind: 'failed', side: 'destination', error: `Relay destination ${who} granted more credit than the relay window (${MAX_RELAY_ENTRIES} entries, ${RELAY_WINDOW_BYTES} bytes)` });
        }
        if (this.source) this.passCredit(entries, bytes);
        return;
      }
      case 'relay.want':
        if (!this.source) return this.end({ kind: 'failed', side: 'destination', error: `Relay destination ${who} wanted files before the source listed any` });
        this.wanted += message.payload.files.length;
        return this.forward(this.toSource, this.destination!, this.source, 'relay.want', message.payload);
      case 'relay.end':
        return this.end({ kind: 'ended', by: 'destination', notice: message.payload });
      default:
        return this.end({ kind: 'failed', side: 'destination', error: `Relay destination ${who} sent ${message.type}, which only a source sends` });
    }
  }

  /** `relay.entries`, `relay.sent` or `relay.end` of the source side. */
  fromSource(message: AgentRelayMessage): void {
    if (this.over) return;
    const who = this.source?.label ?? 'the source';
    switch (message.type) {
      case 'relay.entries': {
        this.received.entries += message.payload.entries.length;
        if (this.received.entries > this.granted.entries) {
          return this.end({ kind: 'failed', side: 'source', error: `Relay source ${who} sent ${this.received.entries - this.granted.entries} listing entries more than the destination granted` });
        }
        return this.forward(this.toDestination, this.source!, this.destination!, 'relay.entries', message.payload);
      }
      case 'relay.sent':
        return this.sent(message.payload);
      case 'relay.end':
        return this.end({ kind: 'ended', by: 'source', notice: message.payload });
      default:
        return this.end({ kind: 'failed', side: 'source', error: `Relay source ${who} sent ${message.type}, which only a destination sends` });
    }
  }

  /** A binary frame of the source side: forwarded unchanged, within the byte credit. */
  fromSourceBinary(chunk: RelayChunk, frame: Buffer): void {
    if (this.over) return;
    this.received.bytes += chunk.payload.length;
    if (this.received.bytes > this.granted.bytes) {
      return this.end({ kind: 'failed', side: 'source', error: `Relay source ${this.source!.label} sent ${this.received.bytes - this.granted.bytes} bytes more than the destination granted` });
    }
    const sent = this.toDestination.carry(this.source!, frame.length);
    if (this.destination!.sendBinary(frame, sent)) this.o.forwarded(chunk.payload.length);
    else sent();
  }

  /**
   * What the source vouches for: on a peer, passed on to the host; on the host, recorded. Either
   * way it counts in flight toward the destination until written (the source is held past the
   * pipe's bound), and a source vouching for more files than were wanted breaks the protocol.
   */
  private sent(payload: Forwarded['relay.sent']): void {
    this.vouchedFor += payload.files.length;
    if (this.vouchedFor > this.wanted) {
      return this.end({ kind: 'failed', side: 'source', error: `Relay source ${this.source!.label} vouched for ${this.vouchedFor - this.wanted} files more than the destination wanted` });
    }
    if (!this.o.vouched) return this.forward(this.toDestination, this.source!, this.destination!, 'relay.sent', payload);
    const done = this.toDestination.carry(this.source!, textSize(payload));
    // Not written: those files are not moved or deleted, and the settle step says why (relay/vouched.ts).
    void this.o.vouched(payload.files).finally(() => done());
  }

  /** Ends the relay (once): tells each side as the outcome says, releases what it holds, reports. */
  end(outcome: RelayOutcome): void {
    if (this.over) return;
    this.outcome = outcome;
    this.toDestination.stop();
    this.toSource.stop();
    this.destination?.finish(this.farewell('destination'));
    this.source?.finish(this.farewell('source'));
    this.o.onEnd(this, outcome);
  }

  private passCredit(entries: number, bytes: number): void {
    this.passed.entries += entries;
    this.passed.bytes += bytes;
    this.forward(this.toSource, this.destination!, this.source!, 'relay.credit', { job_id: this.jobId, attempt: this.attempt, entries, bytes });
  }

  private forward<T extends keyof Forwarded>(pipe: Pipe, from: RelayEnd, to: RelayEnd, type: T, payload: Forwarded[T]): void {
    const sent: Sent = pipe.carry(from, textSize(payload));
    if (!to.send(type, payload, sent)) sent();
  }

  /**
   * What `side` is told. A side that ended the relay, or is lost, gets no `relay.end` (a link to it
   * is closed). On a peer, the link to the host closes with the code of a lost or failed source,
   * which decides what the host does with the job; every other ending closes a link normally.
   */
  private farewell(side: Side): Farewell {
    const o = this.outcome!;
    const notice = o.kind === 'ended' ? o.notice : { job_id: this.jobId, attempt: this.attempt, error: o.error };
    const reason = o.kind === 'ended' ? 'relay ended' : o.error;
    if ((o.kind === 'ended' && o.by === side) || (o.kind === 'lost' && o.side === side)) {
      return { notice: null, code: o.kind === 'lost' ? LinkCloseCodes.lost : LinkCloseCodes.normal, reason };
    }
    if (this.role === 'peer' && side === 'destination' && (o.kind === 'lost' || o.kind === 'failed')) {
      return { notice, code: o.kind === 'lost' ? LinkCloseCodes.lost : LinkCloseCodes.failed, reason };
    }
    return { notice, code: LinkCloseCodes.normal, reason };
  }
}

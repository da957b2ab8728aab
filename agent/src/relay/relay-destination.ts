import type { Readable } from 'node:stream';
import {
  AgentToServer, frame, MAX_RELAY_ENTRIES, RELAY_WINDOW_BYTES,
  type AgentMessage, type PayloadOf, type RelayEntry, type ServerToAgent,
} from '@xfer/shared';
import type { Logger } from 'pino';
import type { Entry } from '../connectors/types.js';
import { CopyJobError } from '../copy/errors.js';
import type { SourceItem } from '../copy/types.js';
import type { RelayLink } from '../session/relay-link.js';
import { isRelayPath } from './relay-path.js';
import { RelayBreach, SMALL_FILE_BYTES } from './relay-tar.js';
import { TarReceiver } from './tar-receiver.js';

type Payload<T extends keyof typeof ServerToAgent> = PayloadOf<typeof ServerToAgent, T>;

/**
 * Credit is granted again in steps of at least this much consumed: fewer, larger `relay.credit`
 * messages (each crosses the control plane), while the source always has three quarters of the
 * window to send into.
 */
const ENTRY_GRANT_STEP = MAX_RELAY_ENTRIES / 4;
const BYTE_GRANT_STEP = RELAY_WINDOW_BYTES / 4;
/** UTF-8 bytes of the paths of one `relay.want`, at most: the message stays far below the frame limit. */
const MAX_WANT_PATH_BYTES = 1024 * 1024;

/** The relay is over for a reason that is not the job's: the run ends `interrupted`, for another to take over. */
export class RelayInterrupted extends Error {
  override readonly name = 'RelayInterrupted';
}

export interface RelayDestinationOptions {
  link: RelayLink;
  jobId: string;
  attempt: number;
  /** The run's write concurrency: small files held in memory are bounded by it (× SMALL_FILE_BYTES). */
  concurrency: number;
  log?: Logger;
  /**
   * The relay was interrupted (the other side or the control plane ended it with an error that
   * is not the job's, the session was lost): the run must stop now and end `interrupted`. Called
   * before anything of the run fails because of it.
   */
  onInterrupted: (err: RelayInterrupted) => void;
  /** The relay ended (`finish`, or broken): the hub forgets it. */
  onEnded: () => void;
}

/**
 * The destination side of a relayed job (relay-protocol.ts): the copy engine's item source in
 * place of a connector. `items()` yields the source agent's listing (`relay.entries`), granting
 * entry credit as the engine takes items; an item's `open` sends a `relay.want` (the wants of one
 * tick in one message) and hands out the file's bytes from the tar stream (tar-receiver.ts),
 * verified against the source's SHA-256; byte credit is granted as the tar stream is consumed.
 * Files the engine skips are never wanted; a retry of a file wants it again.
 *
 * It ends with `finish` (the run is over: `relay.end` to the source), or breaks: a `relay.end`
 * from the other side or the control plane, the session's end, a breach of the contract. A
 * permanent error of the source (`relay.end.permanent`: its path does not exist, …) or a breach
 * fails the run with that error; anything else interrupts it (`onInterrupted`).
 */
export class RelayDestination {
  private readonly receiver: TarReceiver;
  private readonly listing: RelayEntry[] = [];
  private listingDone = false;
  private wakeListing: (() => void) | null = null;
  private failure: Error | null = null;
  private ended = false;
  private entriesGranted = 0;
  private entriesReceived = 0;
  private entriesToGrant = 0;
  private bytesGranted = 0;
  private bytesReceived = 0;
  private bytesToGrant = 0;
  private wants: { path: string; size: number }[] = [];
  private wantsScheduled = false;
  /** Files wanted of the source whose trailer has not arrived yet. */
  private unanswered = 0;
  /** While the source has this many wants unanswered, wants are held back until `wantBatch` of them wait (see `scheduleWants`). */
  private readonly wantLowWater: number;
  private readonly wantBatch: number;
  private readonly onLinkEnd = () => this.interrupt(`the session with the control plane ended: ${(this.o.link.signal.reason as Error | undefined)?.message ?? 'closed'}`);

  constructor(private readonly o: RelayDestinationOptions) {
    this.receiver = new TarReceiver({
      memoryBytes: o.concurrency * SMALL_FILE_BYTES,
      onConsumed: (bytes) => this.consumed(0, bytes),
      onBreach: (err) => this.breach(err),
      onAnswered: () => {
        this.unanswered--;
        this.scheduleWants();
      },
    });
    this.wantLowWater = Math.ceil(o.concurrency / 2);
    this.wantBatch = Math.ceil(o.concurrency / 4);
  }

  /** Starts the conversation: the first credit. */
  start(): void {
    if (this.o.link.signal.aborted) {
      this.onLinkEnd();
      return;
    }
    this.o.link.signal.addEventListener('abort', this.onLinkEnd, { once: true });
    this.grant(MAX_RELAY_ENTRIES, RELAY_WINDOW_BYTES);
  }

  /**
   * The source's listing as the engine's items, in its order. Throws the relay's failure when
   * it broke (a CopyJobError for the source's permanent errors: the run fails with it).
   */
  async *items(): AsyncGenerator<SourceItem> {
    for (;;) {
      const entry = this.listing.shift();
      if (entry) {
        this.consumed(1, 0);
        yield this.item(entry);
        continue;
      }
      if (this.failure) throw this.failure;
      if (this.listingDone) return;
      await new Promise<void>((resolve) => { this.wakeListing = resolve; });
    }
  }

  /** A relay message for this side (the hub routes `relay.entries` and `relay.end` here). */
  message(m: { type: 'relay.entries'; payload: Payload<'relay.entries'> } | { type: 'relay.end'; payload: Payload<'relay.end'> }): void {
    if (this.ended) return;
    if (m.type === 'relay.end') {
      const { error, permanent } = m.payload;
      if (error === undefined) this.interrupt('the source side ended the relay before the destination was done');
      else if (permanent) this.break(new CopyJobError(error), false);
      else this.interrupt(`the relay was interrupted: ${error}`);
      return;
    }
    const { entries, done } = m.payload;
    if (this.listingDone) return this.breach(new RelayBreach('the source listed more after its last page'));
    this.entriesReceived += entries.length;
    if (this.entriesReceived > this.entriesGranted) return this.breach(new RelayBreach('the source listed more entries than granted'));
    for (const entry of entries) {
      if (!isRelayPath(entry.path)) return this.breach(new RelayBreach(`the source listed a path that is not relative and normalized: ${JSON.stringify(entry.path)}`));
    }
    this.listing.push(...entries);
    if (done) this.listingDone = true;
    this.wake();
  }

  /** A payload of the tar stream. */
  chunk(payload: Buffer): void {
    if (this.ended) return;
    this.bytesReceived += payload.length;
    if (this.bytesReceived > this.bytesGranted) return this.breach(new RelayBreach('the source sent more bytes than granted'));
    this.receiver.push(payload);
  }

  /**
   * The run is over: `relay.end` goes to the source (with `error` when the run failed or was
   * cancelled), and whatever is still held is dropped. Idempotent.
   */
  finish(error?: string): void {
    this.end(error === undefined ? {} : { error });
    this.receiver.fail(new Error('the relay is over'));
  }

  private item(entry: RelayEntry): SourceItem {
    const modified = entry.modified_at === undefined ? undefined : new Date(entry.modified_at);
    const described: Entry = {
      path: entry.path, kind: entry.kind, size: entry.size,
      ...(modified && !Number.isNaN(modified.getTime()) ? { modifiedAt: modified } : {}),
      ...(entry.checksum ? { checksum: { algorithm: entry.checksum.algorithm, value: entry.checksum.value.toLowerCase() } } : {}),
    };
    return { path: entry.path, entry: described, open: (signal) => this.want(entry.path, entry.size, signal) };
  }

  private want(path: string, size: number, signal: AbortSignal): Promise<Readable> {
    if (this.failure) return Promise.reject(this.failure);
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    const opened = this.receiver.want(path, size, signal);
    this.wants.push({ path, size });
    this.scheduleWants();
    return opened;
  }

  /**
   * Sends the waiting wants at the end of this tick (those of one tick in one message), unless
   * the source still has `wantLowWater` files to serve and fewer than `wantBatch` wait: then they
   * wait for more, or for answers to bring the source below that (`onAnswered` calls this
   * again). Each want costs a message and a wake-up of the control plane and of the source; with
   * small files, one a file (the engine opens them as its writers free up) was most of what the
   * relay added. The source never runs dry meanwhile: it has half the run's concurrency to read.
   */
  private scheduleWants(): void {
    if (this.wantsScheduled || this.wants.length === 0) return;
    if (this.unanswered >= this.wantLowWater && this.wants.length < this.wantBatch) return;
    this.wantsScheduled = true;
    setImmediate(() => this.sendWants());
  }

  /** The waiting wants, in order, in as few messages as the limits allow. */
  private sendWants(): void {
    this.wantsScheduled = false;
    const wants = this.wants;
    this.wants = [];
    if (this.ended) return;
    this.unanswered += wants.length;
    let batch: { path: string; size: number }[] = [];
    let bytes = 0;
    for (const want of wants) {
      const length = Buffer.byteLength(want.path);
      if (batch.length > 0 && (batch.length >= MAX_RELAY_ENTRIES || bytes + length > MAX_WANT_PATH_BYTES)) {
        this.send('relay.want', { ...this.ref(), files: batch });
        batch = [];
        bytes = 0;
      }
      batch.push(want);
      bytes += length;
    }
    if (batch.length > 0) this.send('relay.want', { ...this.ref(), files: batch });
  }

  /** The engine took `entries` items, the tar parser `bytes` bytes: grant them again, in steps. */
  private consumed(entries: number, bytes: number): void {
    this.entriesToGrant += entries;
    this.bytesToGrant += bytes;
    if (this.entriesToGrant >= ENTRY_GRANT_STEP || this.bytesToGrant >= BYTE_GRANT_STEP) this.grant(this.entriesToGrant, this.bytesToGrant);
  }

  private grant(entries: number, bytes: number): void {
    if (this.ended) return;
    // Once the listing ended, entry credit is of no use to anyone.
    const grantEntries = this.listingDone ? 0 : entries;
    this.entriesToGrant = 0;
    this.bytesToGrant = 0;
    if (grantEntries === 0 && bytes === 0) return;
    this.entriesGranted += grantEntries;
    this.bytesGranted += bytes;
    this.send('relay.credit', { ...this.ref(), entries: grantEntries, bytes });
  }

  private interrupt(reason: string): void {
    if (this.ended) return;
    const err = new RelayInterrupted(reason);
    this.o.onInterrupted(err);
    this.break(err, false);
  }

  private breach(err: RelayBreach): void {
    this.o.log?.error({ err: err.message }, 'the relay broke the protocol');
    this.break(new CopyJobError(`relay protocol error: ${err.message}`), true);
  }

  /** The relay broke: listing and wanted files fail with `err`; `tell` the source why (it did not end it). */
  private break(err: Error, tell: boolean): void {
    if (this.ended) return;
    this.failure = err;
    if (tell) this.end({ error: err.message, permanent: true });
    else this.end(null);
    this.receiver.fail(err);
    this.wake();
  }

  /** Over: `relay.end` with `end` (null: none, the other side ended it or the session is gone). */
  private end(end: { error?: string; permanent?: boolean } | null): void {
    if (this.ended) return;
    this.ended = true;
    this.o.link.signal.removeEventListener('abort', this.onLinkEnd);
    if (end) this.send('relay.end', { ...this.ref(), ...end, ...(end.error ? { error: end.error.slice(0, 4000) } : {}) });
    this.o.onEnded();
  }

  private wake(): void {
    const wake = this.wakeListing;
    this.wakeListing = null;
    wake?.();
  }

  private ref(): { job_id: string; attempt: number } {
    return { job_id: this.o.jobId, attempt: this.o.attempt };
  }

  private send<T extends keyof typeof AgentToServer & `relay.${string}`>(type: T, payload: PayloadOf<typeof AgentToServer, T>): void {
    this.o.link.send(frame(AgentToServer, type, payload) as AgentMessage);
  }
}

import type { Readable } from 'node:stream';
import {
  AgentToServer, compileFilters, frame, MAX_RELAY_ENTRIES, MAX_RELAY_SENT_FILES, RELAY_CHUNK_BYTES, RELAY_FRAME_HEADER_BYTES, relayFrameHeader,
  type AgentMessage, type PayloadOf, type RelayEntry, type ServerToAgent,
} from '@xfer/shared';
import type { Logger } from 'pino';
import { baseName, joinRel, relativePath } from '../connectors/paths.js';
import type { Connector } from '../connectors/types.js';
import { reasonOf } from '../copy/errors.js';
import { readSide } from '../copy/read-side.js';
import { withKeptTime } from '../copy/diff.js';
import { orderedSourceItems } from '../copy/sync-engine.js';
import type { SourceItem } from '../copy/types.js';
import type { ConnectorSource } from '../lib/connector-source.js';
import type { RelayLink } from '../session/relay-link.js';
import { isRelayPath } from './relay-path.js';
import { RelayTarWriter, SMALL_FILE_BYTES, type ReadResult } from './relay-tar.js';

type Payload<T extends keyof typeof ServerToAgent> = PayloadOf<typeof ServerToAgent, T>;
export type RelaySourceRequest = Payload<'relay.source'>;

/** A listing page goes out once it waited this long for more entries (a slow listing still shows progress). */
const PAGE_LINGER_MS = 25;
/** UTF-8 bytes of the paths of one `relay.entries`, at most: the message stays far below the frame limit. */
const MAX_PAGE_PATH_BYTES = 1024 * 1024;
/** Wants outstanding at once, at most: a destination asking for more is breaking the protocol. */
const MAX_WANTS = 10 * MAX_RELAY_ENTRIES;
/** The protocol's bound on a listed path. */
const MAX_PATH_CHARS = 4096;
/** How long a frame that is not full waits for more bytes while wanted files are being read (see `pump`). */
const FRAME_LINGER_MS = 2;
/** Frame buffers kept for reuse, at most: the socket holds a few frames at once (RELAY_SEND_MARK_BYTES). */
const MAX_SPARE_FRAMES = 8;

/** How a source side ended, for the hub's metrics. */
export interface RelaySourceEnd {
  /** completed: the destination ended it without error; failed: anything else. */
  status: 'completed' | 'failed';
  sourceType: string;
  bytesSent: number;
}

export interface RelaySourceOptions {
  link: RelayLink;
  request: RelaySourceRequest;
  /** The agent's connectors, with its owner's access rules: the same door as its jobs. */
  connectors: ConnectorSource;
  log: Logger;
  /** The side stopped: its connector is closed and its `relay.end` sent. */
  onEnded: (end: RelaySourceEnd) => void;
}

interface Want {
  path: string;
  size: number;
  /** A small file's bytes, read ahead (or why they could not be). */
  ahead?: Promise<Buffer[] | { error: string }>;
}

/**
 * The source side of a relay (relay-protocol.ts), from `relay.source` to `relay.end`: builds the
 * source connector, lists `source_path` lazily (copy/read-side.ts) into `relay.entries` pages
 * within the entry credit the destination grants, and serves its `relay.want`s in order as one
 * tar stream (relay-tar.ts) of binary frames of at most RELAY_CHUNK_BYTES, sent only within byte
 * credit and at the socket's pace. Up to `concurrency` wanted files are read ahead: small ones
 * (≤ SMALL_FILE_BYTES) whole into memory, large ones streamed when their turn comes. Memory is
 * flat whatever the number and size of the files: one listing page, the files read ahead, the
 * tar writer's buffer (one frame), the frame being sent.
 *
 * Ends on the destination's (or the control plane's) `relay.end`, on `stop` (a cancel, the
 * agent shutting down), on a listing that fails (`relay.end` with `permanent`: the job's own
 * error), or when the session is lost; then reads are aborted and the connector closed.
 */
export class RelaySource {
  private readonly controller = new AbortController();
  private readonly writer = new RelayTarWriter({ highWaterMark: RELAY_CHUNK_BYTES });
  /** Credit granted, files wanted (the listing and the packing wait for them). */
  private readonly changed = new Notifier();
  /** Bytes to send, credit granted, or all wanted files packed (the sending waits for them). */
  private readonly sendable = new Notifier();
  /** Every file wanted so far is packed: a frame not full goes out at once (nothing more comes until the destination wants more). */
  private servedAll = false;
  /** Frame buffers the link is done with, for the next frames (see `pump`). */
  private readonly spareFrames: Buffer[] = [];
  private readonly wants: Want[] = [];
  /** Files packed and not yet vouched for in a `relay.sent` (at most MAX_RELAY_SENT_FILES). */
  private vouched: PayloadOf<typeof AgentToServer, 'relay.sent'>['files'] = [];
  private entryCredit = 0;
  private byteCredit = 0;
  private bytesSent = 0;
  private framesSent = 0;
  /** The first reason to stop; `null` message: say nothing (the session is gone). */
  private ending: { message: { error?: string; permanent?: boolean } | null; status: RelaySourceEnd['status'] } | null = null;
  /** Whether the source path is a file (its one item named by its base name), once the listing said so. */
  private rootIsFile: boolean | null = null;
  private readonly root: string;
  readonly done: Promise<void>;

  constructor(private readonly o: RelaySourceOptions) {
    this.root = relativePath(o.request.source_path);
    this.done = this.run();
  }

  /** The `relay.source` this side serves. */
  get request(): RelaySourceRequest {
    return this.o.request;
  }

  /** A relay message for this side (the hub routes `relay.credit`, `relay.want` and `relay.end` here). */
  message(m:
    | { type: 'relay.credit'; payload: Payload<'relay.credit'> }
    | { type: 'relay.want'; payload: Payload<'relay.want'> }
    | { type: 'relay.end'; payload: Payload<'relay.end'> }): void {
    if (this.ending) return;
    switch (m.type) {
      case 'relay.credit':
        this.entryCredit += m.payload.entries;
        this.byteCredit += m.payload.bytes;
        this.changed.notify();
        this.sendable.notify();
        return;
      case 'relay.want':
        for (const file of m.payload.files) {
          const problem = this.checkWant(file.path);
          if (problem) return this.finish({ error: `relay protocol error: ${problem}`, permanent: true }, 'failed');
          this.wants.push({ path: file.path, size: file.size });
        }
        if (this.wants.length > MAX_WANTS) return this.finish({ error: `relay protocol error: more than ${MAX_WANTS} files wanted at once`, permanent: true }, 'failed');
        this.changed.notify();
        return;
      case 'relay.end':
        // The destination is done (or gone): answered with this side's own end once stopped.
        this.finish({}, m.payload.error === undefined ? 'completed' : 'failed');
    }
  }

  /** Stops serving (a cancel, the agent shutting down): `relay.end` with `reason` to the destination. */
  stop(reason: string): void {
    this.finish({ error: reason }, 'failed');
  }

  private finish(message: { error?: string; permanent?: boolean } | null, status: RelaySourceEnd['status']): void {
    if (this.ending) return;
    this.ending = { message, status };
    const reason = new Error(message?.error ?? 'the relay ended');
    this.controller.abort(reason);
    // Packing may be waiting for room in the writer's output: that wait ends here too.
    this.writer.destroy(reason);
  }

  private async run(): Promise<void> {
    const { link, request, log } = this.o;
    const onLinkEnd = () => this.finish(null, 'failed');
    link.signal.addEventListener('abort', onLinkEnd, { once: true });
    if (link.signal.aborted) onLinkEnd();
    const signal = this.controller.signal;
    let connector: Connector | null = null;
    try {
      connector = await this.o.connectors.create(request.source);
      if (!signal.aborted) {
        const source = connector;
        // Until the relay ends; each stops at the abort (their own failures end the relay).
        await Promise.allSettled([this.list(source, signal), this.serve(source, signal), this.pump(signal)]);
      }
    } catch (err) {
      // The connector could not be built (unsupported type, bad settings, a host the owner forbids): the job's own error.
      this.finish({ error: reasonOf(err), permanent: true }, 'failed');
    } finally {
      link.signal.removeEventListener('abort', onLinkEnd);
      this.writer.destroy();
      await connector?.close().catch((e: unknown) => log.warn({ err: reasonOf(e) }, 'closing a connector failed'));
      const ending = this.ending!;
      if (ending.message) this.vouch();
      if (ending.message) this.send('relay.end', { ...this.ref(), ...ending.message, ...(ending.message.error ? { error: ending.message.error.slice(0, 4000) } : {}) });
      log.info({ bytes_sent: this.bytesSent, frames_sent: this.framesSent, status: ending.status, error: ending.message?.error }, 'relay source ended');
      this.o.onEnded({ status: ending.status, sourceType: request.source.type, bytesSent: this.bytesSent });
    }
  }

  /** The listing, in pages within entry credit; the last one says `done`. A failure ends the relay (the job's own error). */
  private async list(source: Connector, signal: AbortSignal): Promise<void> {
    let page: RelayEntry[] = [];
    let pageBytes = 0;
    const flush = (done: boolean) => {
      if (page.length === 0 && !done) return;
      this.entryCredit -= page.length;
      this.send('relay.entries', { ...this.ref(), entries: page, done });
      page = [];
      pageBytes = 0;
    };
    try {
      const items = this.listing(source, signal)[Symbol.asyncIterator]();
      let pending: Promise<IteratorResult<SourceItem>> | null = null;
      for (;;) {
        pending ??= items.next();
        const got = page.length === 0 ? await pending : await within(pending, PAGE_LINGER_MS);
        if (got === TIMED_OUT) {
          flush(false);
          continue;
        }
        pending = null;
        if (got.done) break;
        const entry = relayEntry(got.value);
        this.rootIsFile ??= got.value.entry.path === this.root;
        while (page.length >= this.entryCredit) {
          flush(false);
          await this.changed.wait(signal);
        }
        page.push(entry);
        pageBytes += Buffer.byteLength(entry.path);
        if (page.length >= MAX_RELAY_ENTRIES || pageBytes >= MAX_PAGE_PATH_BYTES) flush(false);
      }
      flush(true);
    } catch (err) {
      if (!signal.aborted) this.finish({ error: reasonOf(err), permanent: true }, 'failed');
    }
  }

  /**
   * The source's items: the lazy listing of a plain copy, or, for a job that compares listings
   * (`relay.source.listing`), the ordered and filtered one (copy/sync-engine.ts), which the
   * destination merges with its own.
   */
  private listing(source: Connector, signal: AbortSignal): AsyncIterable<SourceItem> {
    const { source_path: path, listing } = this.o.request;
    if (!listing) return readSide(source, path, signal);
    const root = this.root;
    // A comparison by time needs the kept time the listing lacked (an S3 object the index does not
    // know); only this agent can stat the source. Up to `concurrency` stats at once, in order.
    const byTime = (listing.compare ?? 'size_mtime') === 'size_mtime';
    const width = this.o.request.concurrency;
    const kept = (item: SourceItem): Promise<SourceItem> => (byTime ? withKeptTime(item, () => source.stat(item.entry.path, { signal })) : Promise.resolve(item));
    return (async function* () {
      const window: Promise<SourceItem>[] = [];
      for await (const item of orderedSourceItems(source, path, compileFilters(listing.filters, new Date()), signal)) {
        // The destination cannot tell a file root's one item from a tree's: it would delete the rest of its directory.
        if (listing.mode === 'sync' && item.entry.kind === 'file' && item.entry.path === root) {
          throw new Error(`sync of the single file ${path} through a relay is not supported: copy it`);
        }
        window.push(kept(item));
        if (window.length >= width) yield await window.shift()!;
      }
      while (window.length > 0) yield await window.shift()!;
    })();
  }

  /** The wanted files, in order, into the tar writer; small ones read ahead. */
  private async serve(source: Connector, signal: AbortSignal): Promise<void> {
    try {
      for (;;) {
        while (this.wants.length === 0) {
          this.vouch();
          if (!this.servedAll) {
            this.servedAll = true;
            this.sendable.notify();
          }
          await this.changed.wait(signal);
        }
        this.servedAll = false;
        this.readAhead(source, signal);
        const want = this.wants.shift()!;
        this.packed(want, await this.pack(source, want, signal));
      }
    } catch (err) {
      if (!signal.aborted) this.finish({ error: `the source agent failed serving the relay: ${reasonOf(err)}` }, 'failed');
    }
  }

  /** One wanted file into the tar writer: the SHA-256 of the bytes read, or why it could not be read whole. */
  private async pack(source: Connector, want: Want, signal: AbortSignal): Promise<ReadResult> {
    if (want.ahead) {
      const read = await want.ahead;
      return Array.isArray(read) ? this.writer.file(want.path, want.size, read, signal) : this.writer.file(want.path, want.size, null, signal, read.error);
    }
    let body: Readable;
    try {
      body = await source.read(this.sourcePath(want.path), { signal });
    } catch (err) {
      signal.throwIfAborted();
      return this.writer.file(want.path, want.size, null, signal, reasonOf(err));
    }
    try {
      return await this.writer.file(want.path, want.size, body, signal);
    } finally {
      body.destroy();
    }
  }

  /**
   * A file packed whole is vouched for (`relay.sent`: path, size, and the SHA-256 this side
   * computed while reading it), in batches; one it could not read is not. The control plane moves
   * or deletes a source file only when the destination's verified result matches this record
   * (docs/security.md "Relays").
   */
  private packed(want: Want, result: ReadResult): void {
    if (!('sha256' in result)) return;
    this.vouched.push({ path: want.path, size: want.size, sha256: result.sha256 });
    if (this.vouched.length >= MAX_RELAY_SENT_FILES) this.vouch();
  }

  /** Sends the files packed since the last `relay.sent`, if any. */
  private vouch(): void {
    if (this.vouched.length === 0) return;
    this.send('relay.sent', { ...this.ref(), files: this.vouched });
    this.vouched = [];
  }

  /** Starts reading the small files among the next `concurrency` wants (the one due now included). */
  private readAhead(source: Connector, signal: AbortSignal): void {
    const ahead = Math.min(this.wants.length, this.o.request.concurrency);
    for (let i = 0; i < ahead; i++) {
      const want = this.wants[i]!;
      if (want.ahead || want.size > SMALL_FILE_BYTES) continue;
      want.ahead = this.readWhole(source, want, signal);
    }
  }

  /** A small file's bytes (up to one byte more than wanted: the writer notices the change), or why not. */
  private async readWhole(source: Connector, want: Want, signal: AbortSignal): Promise<Buffer[] | { error: string }> {
    let body: Readable | undefined;
    try {
      body = await source.read(this.sourcePath(want.path), { signal });
      const chunks: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of body as AsyncIterable<Buffer>) {
        chunks.push(chunk);
        bytes += chunk.length;
        if (bytes > want.size) break;
      }
      return chunks;
    } catch (err) {
      return { error: reasonOf(err) };
    } finally {
      body?.destroy();
    }
  }

  /**
   * The tar writer's bytes as binary frames, within byte credit, at the socket's pace. A frame
   * goes out full (RELAY_CHUNK_BYTES, or all the credit left), or as it is once every wanted file
   * is packed, or once it waited FRAME_LINGER_MS for more while files are being read: every frame
   * costs a write and a wake-up on each hop (this agent, the control plane, the destination), and
   * the source's reads answer in pieces of 64 KiB and less, so sent as they came a small file or
   * a piece of a large one was a frame of its own.
   */
  private async pump(signal: AbortSignal): Promise<void> {
    const output = this.writer.output;
    const wake = () => this.sendable.notify();
    output.on('readable', wake);
    output.on('close', wake);
    let parts: Buffer[] = [relayFrameHeader(this.o.request.job_id, this.o.request.attempt)];
    let bytes = 0;
    let carry: Buffer | null = null;
    let linger: NodeJS.Timeout | null = null;
    let lingered = false;
    try {
      for (;;) {
        const room = Math.min(RELAY_CHUNK_BYTES, this.byteCredit);
        while (bytes < room) {
          let chunk: Buffer | null = carry ?? (output.read() as Buffer | null);
          carry = null;
          if (chunk === null) break;
          if (bytes + chunk.length > room) {
            carry = chunk.subarray(room - bytes);
            chunk = chunk.subarray(0, room - bytes);
          }
          parts.push(chunk);
          bytes += chunk.length;
        }
        if (bytes > 0 && (bytes >= room || this.servedAll || lingered)) {
          if (linger) clearTimeout(linger);
          linger = null;
          lingered = false;
          this.byteCredit -= bytes;
          this.bytesSent += bytes;
          this.framesSent++;
          // Into a frame buffer the link is done with, when there is one: a new one for every
          // frame was a quarter of what this side allocated (and the garbage collector freed).
          const buffer = this.spareFrames.pop() ?? Buffer.allocUnsafe(RELAY_FRAME_HEADER_BYTES + RELAY_CHUNK_BYTES);
          let at = 0;
          for (const part of parts) at += part.copy(buffer, at);
          parts = [parts[0]!];
          bytes = 0;
          await this.o.link.sendFrame(buffer.subarray(0, at), () => {
            if (this.spareFrames.length < MAX_SPARE_FRAMES) this.spareFrames.push(buffer);
          });
          continue;
        }
        if (output.destroyed && carry === null) throw new Error('the relay tar writer closed');
        if (bytes > 0 && !linger) linger = setTimeout(() => { lingered = true; wake(); }, FRAME_LINGER_MS);
        await this.sendable.wait(signal);
      }
    } catch (err) {
      if (!signal.aborted) this.finish({ error: `the source agent failed sending the relay: ${reasonOf(err)}` }, 'failed');
    } finally {
      if (linger) clearTimeout(linger);
      output.off('readable', wake);
      output.off('close', wake);
    }
  }

  /** Why a wanted path is not one this side serves, or null. */
  private checkWant(path: string): string | null {
    if (!isRelayPath(path)) return `a wanted path is not relative and normalized: ${JSON.stringify(path)}`;
    if (this.rootIsFile === null) return 'a file was wanted before the listing named any';
    if (this.rootIsFile && path !== baseName(this.root)) return `${JSON.stringify(path)} is not the relayed file`;
    return null;
  }

  /** The connector path of a wanted file (checked by `checkWant`). */
  private sourcePath(path: string): string {
    return this.rootIsFile ? this.root : joinRel(this.root, path);
  }

  private ref(): { job_id: string; attempt: number } {
    return { job_id: this.o.request.job_id, attempt: this.o.request.attempt };
  }

  private send<T extends keyof typeof AgentToServer & `relay.${string}`>(type: T, payload: PayloadOf<typeof AgentToServer, T>): void {
    this.o.link.send(frame(AgentToServer, type, payload) as AgentMessage);
  }
}

/** A listed item as the relay lists it (the protocol's bounds checked: a path past them cannot be relayed). */
function relayEntry(item: SourceItem): RelayEntry {
  if (item.path.length > MAX_PATH_CHARS) throw new Error(`${item.path.slice(0, 100)}…: a path longer than ${MAX_PATH_CHARS} characters cannot be relayed`);
  const { kind, size, modifiedAt, checksum } = item.entry;
  const modified = modifiedAt && !Number.isNaN(modifiedAt.getTime()) ? modifiedAt.toISOString() : undefined;
  return {
    path: item.path, kind, size: kind === 'file' ? size : 0,
    ...(modified ? { modified_at: modified } : {}),
    ...(checksum && checksum.value.length <= 128 ? { checksum: { algorithm: checksum.algorithm, value: checksum.value } } : {}),
  };
}

/** Wakes every waiter at each `notify` (credit granted, files wanted). */
class Notifier {
  private waiters = new Set<() => void>();

  notify(): void {
    const waiters = this.waiters;
    this.waiters = new Set();
    for (const wake of waiters) wake();
  }

  /** Resolves at the next `notify`; rejects when `signal` aborts. */
  wait(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason as Error);
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => { this.waiters.delete(wake); reject(signal.reason as Error); };
      const wake = () => { signal.removeEventListener('abort', onAbort); resolve(); };
      this.waiters.add(wake);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

const TIMED_OUT = Symbol('timed out');

/** `promise`, or TIMED_OUT after `ms` (the promise stays pending for the next call). */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<typeof TIMED_OUT>((resolve) => { timer = setTimeout(() => resolve(TIMED_OUT), ms); })]);
  } finally {
    clearTimeout(timer);
  }
}

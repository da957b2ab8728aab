import { createHash, type Hash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { extract, type ExtractEvents, type Header } from 'tar-stream';
import { ConnectorError } from '../connectors/types.js';
import { VerifyError } from '../copy/errors.js';
import { PreHashedBody } from '../copy/hashing.js';
import { readEntryHeader, RelayBreach, SMALL_FILE_BYTES, type RelayTarEntry } from './relay-tar.js';

/** What a relayed large file's stream holds ahead of its reader. */
const STREAM_HIGH_WATER_MARK = 256 * 1024;

/** One entry being read off the parser (tar-stream's entry stream, a streamx Readable). */
type EntryStream = ExtractEvents['entry'][1];

export interface TarReceiverOptions {
  /** Bytes of small files held in memory at once, at most (the write concurrency × SMALL_FILE_BYTES). */
  memoryBytes: number;
  /** Bytes handed on to the tar parser: the destination grants them to the source again. */
  onConsumed: (bytes: number) => void;
  /** The stream broke the contract: the relay is over. */
  onBreach: (err: RelayBreach) => void;
  /** A wanted file's trailer arrived: the source has answered that want (whatever it said). */
  onAnswered?: () => void;
}

/**
 * The destination's end of a relay's tar stream (relay-tar.ts): takes the binary frames' payloads
 * in order, parses them with tar-stream, and hands each wanted file's bytes to the `want` that
 * asked for it, in want order. A file's bytes count only once its trailer arrived and the SHA-256
 * of what arrived equals the source's: a small file's `want` resolves then; a large file's stream
 * ends then, or errors (a retryable error, so the write side's retry wants the file again).
 *
 * Memory: the payloads not yet parsed (at most the credit granted), one chunk inside the parser,
 * `memoryBytes` of small files, and the stream buffer of the large file being written.
 */
export class TarReceiver {
  private readonly parser = extract();
  private readonly queue: Buffer[] = [];
  private parserReady = true;
  private readonly wanted: WantedFile[] = [];
  private readonly memory: MemoryBudget;
  private failure: Error | null = null;

  constructor(private readonly o: TarReceiverOptions) {
    this.memory = new MemoryBudget(o.memoryBytes);
    this.parser.on('entry', (header, stream, next) => this.entry(header, stream, next));
    this.parser.on('drain', () => {
      this.parserReady = true;
      this.feed();
    });
    this.parser.on('error', (err: Error) => this.breach(err instanceof RelayBreach ? err : new RelayBreach(`the relay's tar stream is not valid: ${err.message}`)));
  }

  /** The next payload of the tar stream. */
  push(payload: Buffer): void {
    if (this.failure || payload.length === 0) return;
    this.queue.push(payload);
    this.feed();
  }

  /**
   * The content of the next wanted file (the caller sends the `relay.want` in the same order).
   * Rejects when `signal` aborts, the file's trailer says the source could not read it, or the
   * relay ends; the file's entry is then read off the stream and dropped when it comes.
   */
  want(path: string, size: number, signal: AbortSignal): Promise<Readable> {
    if (this.failure) return Promise.reject(this.failure);
    const file = new WantedFile(path, size, this.memory);
    this.wanted.push(file);
    return file.opened(signal);
  }

  /** The relay is over: every wanted file not delivered fails with `err`, memory is given back. */
  fail(err: Error): void {
    if (this.failure) return;
    this.failure = err;
    this.queue.length = 0;
    for (const file of this.wanted.splice(0)) file.fail(err);
    this.memory.close();
    this.parser.destroy();
  }

  private feed(): void {
    while (this.parserReady && this.queue.length > 0 && !this.failure) {
      const payload = this.queue.shift()!;
      this.o.onConsumed(payload.length);
      if (!this.parser.write(payload)) this.parserReady = false;
    }
  }

  private entry(header: Header, stream: EntryStream, next: () => void): void {
    // Errors of the entry stream are the parser's, handled there.
    stream.on('error', () => {});
    let entry: RelayTarEntry;
    try {
      entry = readEntryHeader(header);
    } catch (err) {
      this.breach(err as RelayBreach);
      return;
    }
    const file = this.wanted[0];
    if (!file || file.path !== entry.path) {
      this.breach(new RelayBreach(`the source sent ${JSON.stringify(entry.path)} where ${file ? JSON.stringify(file.path) : 'nothing'} was wanted next`));
      return;
    }
    if (entry.kind === 'sum') {
      this.wanted.shift();
      stream.resume();
      next();
      const broken = file.trailer(entry);
      if (broken) this.breach(broken);
      else this.o.onAnswered?.();
      return;
    }
    if (file.phase !== 'wanted' || entry.size !== file.size) {
      this.breach(new RelayBreach(`the source sent ${JSON.stringify(entry.path)} with ${entry.size} bytes where ${file.size} were wanted`));
      return;
    }
    // The next header is parsed only once this entry's bytes were all read (its trailer must find it so).
    const read = file.size <= SMALL_FILE_BYTES ? file.readWhole(stream) : file.stream(stream);
    read.then(() => next(), (err: unknown) => this.breach(new RelayBreach(`reading ${JSON.stringify(entry.path)} off the relay failed: ${(err as Error).message}`)));
  }

  private breach(err: RelayBreach): void {
    if (this.failure) return;
    this.o.onBreach(err);
    this.fail(err);
  }
}

/**
 * One wanted file, from the want to its trailer. `phase`: `wanted` (nothing arrived), `content`
 * (its bytes are arriving), `trailer` (all bytes arrived, the trailer is next), `done`.
 * Abandoned (its reader aborted or destroyed the stream): the bytes still arriving are dropped.
 */
class WantedFile {
  phase: 'wanted' | 'content' | 'trailer' | 'done' = 'wanted';
  private readonly hash: Hash = createHash('sha256');
  private abandoned = false;
  private resolve: (stream: Readable) => void = () => {};
  private reject: (err: Error) => void = () => {};
  private settled = false;
  /** A small file's bytes, whole, until handed out. */
  private chunks: Buffer[] | null = null;
  /** Memory this file holds of the budget. */
  private held = 0;
  /** A large file's stream, handed out at its first byte. */
  private out: PreHashedBody | null = null;
  private entryStream: EntryStream | null = null;

  constructor(readonly path: string, readonly size: number, private readonly memory: MemoryBudget) {}

  opened(signal: AbortSignal): Promise<Readable> {
    return new Promise<Readable>((resolve, reject) => {
      const onAbort = () => {
        this.abandon();
        this.settle(() => reject(signal.reason as Error));
      };
      this.resolve = (stream) => { signal.removeEventListener('abort', onAbort); resolve(stream); };
      this.reject = (err) => { signal.removeEventListener('abort', onAbort); reject(err); };
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** A small file: its bytes into memory (waiting for room in the budget first: the stream waits meanwhile). */
  async readWhole(stream: EntryStream): Promise<void> {
    this.phase = 'content';
    if (!this.abandoned) {
      await this.memory.take(this.size);
      this.held = this.size;
      this.chunks = [];
    }
    await ended(stream, (chunk) => {
      this.hash.update(chunk);
      this.chunks?.push(chunk);
    });
    this.phase = 'trailer';
    if (this.abandoned) this.release();
  }

  /** A large file: a stream handed out now, fed as its reader reads (the tar stream waits for it). Resolves once all its bytes went by. */
  async stream(stream: EntryStream): Promise<void> {
    this.phase = 'content';
    this.entryStream = stream;
    const out = new PreHashedBody({
      highWaterMark: STREAM_HIGH_WATER_MARK,
      read: () => stream.resume(),
      destroy: (err, callback) => {
        // The reader gave up before the end: the rest of the entry is read and dropped.
        if (this.phase !== 'done') this.abandon();
        callback(err);
      },
    });
    this.out = out;
    this.settle(() => this.resolve(out));
    await ended(stream, (chunk) => {
      this.hash.update(chunk);
      if (!this.abandoned && !out.push(chunk)) stream.pause();
    });
    this.phase = 'trailer';
  }

  /** The trailer arrived: the file is delivered, or fails. A RelayBreach when the trailer makes no sense here. */
  trailer(entry: Extract<RelayTarEntry, { kind: 'sum' }>): RelayBreach | null {
    const before = this.phase;
    this.phase = 'done';
    if (before === 'content') return new RelayBreach(`the trailer of ${JSON.stringify(this.path)} came before its content ended`);
    if (before === 'wanted' && 'sha256' in entry) return new RelayBreach(`the source sent no content for ${JSON.stringify(this.path)}`);
    let err: Error | null = null;
    if ('error' in entry) err = new ConnectorError('TRANSIENT', `the source agent could not read ${this.path}: ${entry.error}`);
    else if (this.hash.digest('hex') !== entry.sha256) err = new VerifyError(`the relayed bytes of ${this.path} do not match the source's SHA-256 (changed in transit)`);
    // The bytes handed out are those hashed here: the write side takes this SHA-256 instead of hashing them again.
    const sha256 = 'sha256' in entry ? entry.sha256 : null;
    if (this.abandoned) {
      this.release();
      return null;
    }
    if (err) {
      this.fail(err);
      return null;
    }
    if (this.out) {
      this.out.sha256 = sha256;
      this.out.push(null);
      return null;
    }
    const body = new PreHashedBody({ read() {} });
    body.sha256 = sha256;
    for (const chunk of this.chunks ?? []) body.push(chunk);
    body.push(null);
    this.chunks = null;
    body.once('close', () => this.release());
    this.settle(() => this.resolve(body));
    return null;
  }

  fail(err: Error): void {
    this.phase = 'done';
    this.abandoned = true;
    this.release();
    this.out?.destroy(err);
    this.entryStream?.resume();
    this.settle(() => this.reject(err));
  }

  private abandon(): void {
    if (this.abandoned) return;
    this.abandoned = true;
    this.chunks = null;
    if (this.phase !== 'content') this.release();
    this.entryStream?.resume();
  }

  private release(): void {
    this.chunks = null;
    if (this.held > 0) this.memory.give(this.held);
    this.held = 0;
  }

  private settle(then: () => void): void {
    if (this.settled) return;
    this.settled = true;
    then();
  }
}

/** Resolves when `stream` ended, each chunk given to `onData` on the way; rejects when it closed before. */
function ended(stream: EntryStream, onData: (chunk: Buffer) => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let done = false;
    stream.on('data', (chunk) => onData(chunk as Buffer));
    stream.on('end', () => {
      done = true;
      resolve();
    });
    // Every entry closes after its end: the error (and its stack trace) only for one that did not end.
    stream.on('close', () => {
      if (!done) reject(new Error('the entry ended early'));
    });
  });
}

/** Bytes of small files in memory: taken before one is read off the stream, given back once written (or dropped). */
class MemoryBudget {
  private waiting: { bytes: number; resolve: () => void } | null = null;
  private closed = false;

  constructor(private free: number) {}

  /** Resolves once `bytes` are free (at once after `close`, the caller then checks why). One taker at a time: the tar stream is sequential. */
  take(bytes: number): Promise<void> {
    if (this.closed || bytes <= this.free) {
      this.free -= bytes;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => { this.waiting = { bytes, resolve }; });
  }

  give(bytes: number): void {
    this.free += bytes;
    const w = this.waiting;
    if (w && (this.closed || w.bytes <= this.free)) {
      this.waiting = null;
      this.free -= w.bytes;
      w.resolve();
    }
  }

  close(): void {
    this.closed = true;
    const w = this.waiting;
    this.waiting = null;
    w?.resolve();
  }
}

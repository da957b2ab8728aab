import { Readable } from 'node:stream';

/** One READ's answer: the bytes, and (NFS) whether the file ends there. */
export interface ReadAtAnswer {
  data: Buffer;
  eof?: boolean;
}

/** What the stream needs of a protocol: READ at an offset, and what its errors become. */
export interface ReadAtOptions {
  /** Up to `length` bytes at `offset`; fewer is a short read (the rest is asked again), none the end of the file. */
  readAt: (offset: number, length: number) => Promise<ReadAtAnswer>;
  /** What a failed READ becomes (the connector's ConnectorError). */
  fail: (err: unknown) => Error;
  /** Bytes per READ. */
  chunkBytes: number;
  /** READs in flight at most. */
  depth: number;
  /** The stream's buffer (default chunkBytes). */
  highWaterMark?: number;
  /** An abort destroys the stream with `fail(aborted())`. */
  signal?: AbortSignal;
  aborted?: () => unknown;
  /** Errors the stream is destroyed with from outside also go through `fail` (default: as they are). */
  mapDestroyError?: boolean;
  /** Called exactly once however the stream ends (closes the handle, gives the session slot back). */
  onClose?: () => void;
  /** The bytes at `start`, already read (with the size, when the file was opened). */
  prefetched?: Buffer;
}

interface Slot {
  position: number;
  length: number;
  data?: Buffer;
  eof?: boolean;
  error?: unknown;
}

/**
 * Bytes `[start, end]` of an offset-addressed file, the pipelined READ of the sftp, nfs and smb
 * connectors: up to `depth` READs of `chunkBytes` in flight, so a file streams at the link's
 * bandwidth rather than one round trip per chunk. Chunks are pushed in file order. While the
 * consumer is not reading, answered chunks wait in their slots and the requests keep going until
 * `depth` slots are taken: memory stays at depth × chunkBytes (plus the stream's buffer), and a
 * consumer that pauses briefly (an upload part being cut) finds the next chunks already there
 * instead of restarting the pipeline from empty. A short read asks for the rest before anything
 * later; an empty one, or one at end of file, ends the stream there (the file shrank while read:
 * the engine sees the short size). Every error it emits went through `fail`.
 */
export class ReadAtStream extends Readable {
  private next: number;
  private readonly slots: Slot[] = [];
  private paused = false;

  constructor(start: number, private end: number, private readonly o: ReadAtOptions) {
    super({ highWaterMark: o.highWaterMark ?? o.chunkBytes });
    this.next = start;
    const { prefetched, signal } = o;
    if (prefetched && end >= start) {
      const length = Math.min(prefetched.length, end - start + 1);
      this.slots.push({ position: start, length, data: prefetched.subarray(0, length) });
      this.next = start + length;
    }
    if (signal) {
      const onAbort = () => this.destroy(o.fail(o.aborted ? o.aborted() : signal.reason));
      if (signal.aborted) process.nextTick(onAbort);
      else {
        signal.addEventListener('abort', onAbort, { once: true });
        this.once('close', () => signal.removeEventListener('abort', onAbort));
      }
    }
  }

  override _read(): void {
    this.paused = false;
    this.deliver();
  }

  private fill(): void {
    while (!this.destroyed && this.slots.length < this.o.depth && this.next <= this.end) {
      const length = Math.min(this.o.chunkBytes, this.end - this.next + 1);
      this.request({ position: this.next, length });
      this.next += length;
    }
    if (this.slots.length === 0 && this.next > this.end && !this.destroyed) this.push(null);
  }

  private request(slot: Slot, at: 'head' | 'tail' = 'tail'): void {
    if (at === 'head') this.slots.unshift(slot);
    else this.slots.push(slot);
    this.o.readAt(slot.position, slot.length).then(
      (answer) => {
        slot.data = answer.data;
        slot.eof = answer.eof;
        this.deliver();
      },
      (err: unknown) => {
        slot.error = err;
        this.deliver();
      },
    );
  }

  /** Pushes the completed chunks at the head of the queue, in file order, while the consumer wants more. */
  private deliver(): void {
    while (!this.destroyed && !this.paused && this.slots.length > 0) {
      const head = this.slots[0]!;
      if (head.error !== undefined) {
        this.destroy(this.o.fail(head.error));
        return;
      }
      if (!head.data) break;
      this.slots.shift();
      const data = head.data;
      if (data.length < head.length && (data.length === 0 || head.eof)) {
        // The file ends before the range did: stop asking.
        this.slots.length = 0;
        this.end = head.position + data.length - 1;
        this.next = this.end + 1;
        if (data.length > 0) this.push(data);
        this.push(null);
        return;
      }
      if (data.length < head.length) {
        // A short read (the server may cap the length): ask for the rest before anything later.
        this.request({ position: head.position + data.length, length: head.length - data.length }, 'head');
      }
      if (!this.push(data)) this.paused = true;
    }
    this.fill();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.o.onClose?.();
    callback(err && this.o.mapDestroyError ? this.o.fail(err) : err);
  }
}

import { Readable } from 'node:stream';
import type { SFTPWrapper } from 'ssh2';
import { ConnectorError } from '../types.js';
import { closeFile, readAt, writeAt } from './sftp.ops.js';
import { sftpError } from './sftp.errors.js';

interface Slot {
  position: number;
  length: number;
  data?: Buffer;
  error?: unknown;
}

/**
 * Reads `[start, end]` of an open remote file with up to `depth` READ requests in flight, so a
 * file streams at the link's bandwidth rather than one round trip per chunk (ssh2's own read
 * stream has one request in flight). Chunks are pushed in order. While the consumer is not
 * reading, answered chunks wait in their slots and the requests keep going until `depth` slots
 * are taken: memory stays at `depth × chunkBytes` (plus the stream's buffer), and a consumer that
 * pauses briefly (an upload part being cut) finds the next chunks already there instead of
 * restarting the pipeline from empty. Closes the handle and
 * calls `onClose` exactly once however the stream ends; every error it emits is a ConnectorError.
 */
export class SftpReadStream extends Readable {
  private next: number;
  private readonly slots: Slot[] = [];
  private paused = false;

  constructor(
    private readonly sftp: SFTPWrapper,
    private readonly handle: Buffer,
    private readonly path: string,
    start: number,
    private readonly end: number,
    private readonly tuning: { chunkBytes: number; depth: number },
    private readonly onClose: () => void,
    /** The bytes at `start`, already read (with the size, when the file was opened). */
    prefetched?: Buffer,
  ) {
    super({ highWaterMark: tuning.chunkBytes * 2 });
    this.next = start;
    if (prefetched && end >= start) {
      const length = Math.min(prefetched.length, end - start + 1);
      this.slots.push({ position: start, length, data: prefetched.subarray(0, length) });
      this.next = start + length;
    }
  }

  override _read(): void {
    this.paused = false;
    this.deliver();
    this.fill();
  }

  private fill(): void {
    while (!this.destroyed && this.slots.length < this.tuning.depth && this.next <= this.end) {
      const length = Math.min(this.tuning.chunkBytes, this.end - this.next + 1);
      this.request({ position: this.next, length });
      this.next += length;
    }
    if (this.slots.length === 0 && this.next > this.end && !this.destroyed) this.push(null);
  }

  private request(slot: Slot, at: 'head' | 'tail' = 'tail'): void {
    if (at === 'head') this.slots.unshift(slot);
    else this.slots.push(slot);
    readAt(this.sftp, this.handle, slot.length, slot.position).then(
      (data) => {
        slot.data = data;
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
        this.destroy(sftpError(head.error, this.path, 'read'));
        return;
      }
      if (!head.data) break;
      this.slots.shift();
      if (head.data.length === 0) {
        // End of file before `end`: the file shrank while we read it. The engine sees the short size.
        this.slots.length = 0;
        this.next = this.end + 1;
        this.push(null);
        return;
      }
      if (head.data.length < head.length) {
        // A short read (the server may cap the length): ask for the rest before anything later.
        this.request({ position: head.position + head.data.length, length: head.length - head.data.length }, 'head');
      }
      if (!this.push(head.data)) this.paused = true;
    }
    this.fill();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    // The handle is closed in the background (nobody waits for a read handle's close: a round
    // trip per file saved); the session slot is given back once it is closed.
    closeFile(this.sftp, this.handle)
      .catch(() => undefined)
      .finally(() => this.onClose());
    callback(err ? sftpError(err, this.path, 'read') : null);
  }
}

/**
 * Writes `body` to an open remote file from offset 0 with up to `depth` WRITE requests of
 * `chunkBytes` in flight; small chunks of the body are gathered first, so a body of 16 KiB
 * chunks still goes out in full-sized requests. Resolves with the bytes written once the
 * server has acknowledged every request. The caller closes the handle.
 */
export async function pipelinedWrite(
  sftp: SFTPWrapper,
  handle: Buffer,
  body: AsyncIterable<unknown>,
  tuning: { chunkBytes: number; depth: number },
): Promise<number> {
  const inflight = new Set<Promise<void>>();
  let failure: { err: unknown } | undefined;
  let offset = 0;
  const send = (data: Buffer) => {
    const done: Promise<void> = writeAt(sftp, handle, data, offset).then(
      () => void inflight.delete(done),
      (err: unknown) => {
        inflight.delete(done);
        failure ??= { err };
      },
    );
    inflight.add(done);
    offset += data.length;
  };
  const check = () => {
    if (failure) throw failure.err;
  };

  let gathered: Buffer[] = [];
  let gatheredBytes = 0;
  try {
    for await (const piece of body) {
      check();
      const chunk = Buffer.isBuffer(piece) ? piece : typeof piece === 'string' ? Buffer.from(piece) : Buffer.from(piece as Uint8Array);
      gathered.push(chunk);
      gatheredBytes += chunk.length;
      if (gatheredBytes < tuning.chunkBytes) continue;
      const all = gathered.length === 1 ? gathered[0]! : Buffer.concat(gathered, gatheredBytes);
      let at = 0;
      for (; all.length - at >= tuning.chunkBytes; at += tuning.chunkBytes) {
        send(all.subarray(at, at + tuning.chunkBytes));
        while (inflight.size >= tuning.depth) await Promise.race(inflight);
        check();
      }
      gathered = at < all.length ? [all.subarray(at)] : [];
      gatheredBytes = all.length - at;
    }
    if (gatheredBytes > 0) send(gathered.length === 1 ? gathered[0]! : Buffer.concat(gathered, gatheredBytes));
    await Promise.all(inflight);
    check();
    return offset;
  } finally {
    // On failure too: never let the caller close the handle under requests still in flight.
    await Promise.allSettled(inflight);
  }
}

/** An abort of `signal` as the contract's error. */
export function abortedError(path: string, op: string, signal: AbortSignal): ConnectorError {
  return new ConnectorError('TRANSIENT', `${op} ${path === '' ? '/' : path}: aborted`, { cause: signal.reason });
}

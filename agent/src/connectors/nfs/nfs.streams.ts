import { Readable } from 'node:stream';
import { ConnectorError } from '../types.js';
import { UNSTABLE, type FileHandle, type Nfs3 } from './nfs3.protocol.js';

interface Slot {
  offset: number;
  length: number;
  reply: Promise<{ data: Buffer; eof: boolean }>;
}

/**
 * Bytes `[start, end]` of a file, with up to `depth` READs of `chunkBytes` in flight, pushed in
 * order. New READs are asked only while the consumer wants more (push returned true), so memory
 * stays at depth × chunkBytes whatever the file size. A short reply that is not at end of file
 * asks for the rest; a file that ended early (truncated meanwhile) ends the stream there.
 */
export class NfsReadStream extends Readable {
  private readonly slots: Slot[] = [];
  private next: number;
  private running = false;

  constructor(
    private readonly nfs: Nfs3,
    private readonly fh: FileHandle,
    start: number,
    private end: number,
    private readonly io: { chunkBytes: number; depth: number; signal?: AbortSignal; fail: (err: unknown) => ConnectorError },
  ) {
    super({ highWaterMark: io.chunkBytes });
    this.next = start;
    const signal = io.signal;
    if (signal) {
      const onAbort = () => this.destroy(io.fail(new ConnectorError('TRANSIENT', 'aborted', { cause: signal.reason })));
      if (signal.aborted) process.nextTick(onAbort);
      else {
        signal.addEventListener('abort', onAbort, { once: true });
        this.once('close', () => signal.removeEventListener('abort', onAbort));
      }
    }
  }

  override _read(): void {
    if (!this.running) void this.run();
  }

  private fill(): void {
    while (this.slots.length < this.io.depth && this.next <= this.end) {
      const length = Math.min(this.io.chunkBytes, this.end - this.next + 1);
      this.slots.push(this.request(this.next, length));
      this.next += length;
    }
  }

  private request(offset: number, length: number): Slot {
    const reply = this.nfs.read(this.fh, offset, length, this.io.signal);
    // Replies still in flight when the stream is destroyed are nobody's to handle.
    reply.catch(() => undefined);
    return { offset, length, reply };
  }

  private async run(): Promise<void> {
    this.running = true;
    try {
      for (;;) {
        this.fill();
        const head = this.slots[0];
        if (!head) {
          this.push(null);
          return;
        }
        const { data, eof } = await head.reply;
        if (this.destroyed) return;
        this.slots.shift();
        if (data.length < head.length) {
          if (eof || data.length === 0) {
            // The file ends before the range did: stop asking.
            this.end = head.offset + data.length - 1;
            this.slots.length = 0;
            this.next = this.end + 1;
          } else this.slots.unshift(this.request(head.offset + data.length, head.length - data.length));
        }
        if (data.length > 0 && !this.push(data)) return;
      }
    } catch (err) {
      this.destroy(this.io.fail(err));
    } finally {
      this.running = false;
    }
  }
}

/**
 * Streams `body` into the file behind `fh` from offset 0: chunks gathered into WRITEs of
 * `chunkBytes`, UNSTABLE (the server may cache them), up to `depth` in flight, then one COMMIT.
 * The body is read only while fewer than `depth` WRITEs are outstanding (backpressure). Every
 * reply carries the server's write verifier; a different one on a later WRITE or on the COMMIT
 * means the server restarted and may have lost unstable data. Re-sending would need every byte
 * since the start kept in memory, so the write fails TRANSIENT instead and the engine writes the
 * file again. Resolves with the bytes written.
 */
export async function writeBody(nfs: Nfs3, fh: FileHandle, body: AsyncIterable<unknown>, io: { chunkBytes: number; depth: number; signal?: AbortSignal }): Promise<number> {
  const inFlight = new Set<Promise<void>>();
  let failure: { err: unknown } | null = null;
  let verifier: Buffer | null = null;
  const checkVerifier = (verf: Buffer) => {
    verifier ??= verf;
    if (!verifier.equals(verf)) {
      throw new ConnectorError('TRANSIENT', 'the server restarted during the write (its write verifier changed): unstable data may be lost, write the file again');
    }
  };
  const writeAt = async (data: Buffer, offset: number) => {
    while (data.length > 0) {
      const { count, verf } = await nfs.write(fh, offset, data, UNSTABLE, io.signal);
      checkVerifier(verf);
      if (count === 0) throw new ConnectorError('TRANSIENT', 'the server accepted no bytes of a WRITE');
      data = data.subarray(count);
      offset += count;
    }
  };
  const send = (data: Buffer, offset: number) => {
    const done: Promise<void> = writeAt(data, offset).then(
      () => { inFlight.delete(done); },
      (err: unknown) => { inFlight.delete(done); failure ??= { err }; },
    );
    inFlight.add(done);
  };

  // A function, so that the compiler does not narrow `failure` to what it was before an await.
  const throwIfFailed = () => {
    if (failure) throw failure.err;
  };
  let offset = 0;
  let gathered: Buffer[] = [];
  let gatheredBytes = 0;
  const flush = (bytes: number) => {
    const all = gathered.length === 1 ? gathered[0]! : Buffer.concat(gathered, gatheredBytes);
    send(all.subarray(0, bytes), offset);
    offset += bytes;
    gathered = bytes < all.length ? [all.subarray(bytes)] : [];
    gatheredBytes -= bytes;
  };
  try {
    for await (const chunk of body) {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
      gathered.push(buffer);
      gatheredBytes += buffer.length;
      while (gatheredBytes >= io.chunkBytes) {
        flush(io.chunkBytes);
        while (inFlight.size >= io.depth && !failure) await Promise.race(inFlight);
        throwIfFailed();
      }
    }
    if (gatheredBytes > 0) flush(gatheredBytes);
    await Promise.all(inFlight);
    throwIfFailed();
    if (io.signal?.aborted) throw new ConnectorError('TRANSIENT', 'aborted', { cause: io.signal.reason });
    checkVerifier(await nfs.commit(fh, io.signal));
    return offset;
  } finally {
    // On failure, let the WRITEs still in flight settle before the caller removes the file.
    await Promise.all(inFlight);
  }
}

/**
 * Cutting an upload body into parts: shared by the S3 multipart upload (parts sent as chunk
 * lists), the Azure block and range uploads (each piece held whole for its Content-MD5).
 */
/** A part's bytes as the source gave them: sent as they are, never copied into one buffer. */
export interface Part {
  chunks: Buffer[];
  length: number;
}

/**
 * Cuts a stream of chunks of any size into parts of the requested sizes, without copying: a part
 * is the list of the source's chunks (the last one cut with `subarray`). Copying each part into
 * an 8 MiB buffer cost a memcpy of every byte and, with a fresh buffer per part, a full GC for
 * nearly every part (external memory).
 */
export class PartReader {
  private readonly iterator: AsyncIterator<unknown>;
  private leftover: Buffer | null = null;
  private ended = false;

  constructor(body: AsyncIterable<unknown>) {
    this.iterator = body[Symbol.asyncIterator]();
  }

  /** The next `size` bytes (fewer at the end), or null when the body is exhausted. */
  async next(size: number): Promise<Part | null> {
    const chunks: Buffer[] = [];
    let have = 0;
    const take = (chunk: Buffer) => {
      const need = size - have;
      if (chunk.length > need) {
        chunks.push(chunk.subarray(0, need));
        this.leftover = chunk.subarray(need);
        have = size;
      } else {
        chunks.push(chunk);
        have += chunk.length;
      }
    };
    if (this.leftover) {
      const rest = this.leftover;
      this.leftover = null;
      take(rest);
    }
    while (have < size && !this.ended) {
      const step = await this.iterator.next();
      if (step.done) this.ended = true;
      else take(toBuffer(step.value));
    }
    return have === 0 ? null : { chunks, length: have };
  }

  /** The next `size` bytes as one buffer (a copy only when they span chunks), or null at the end. */
  async nextBuffer(size: number): Promise<Buffer | null> {
    const part = await this.next(size);
    if (!part) return null;
    return part.chunks.length === 1 ? part.chunks[0]! : Buffer.concat(part.chunks, part.length);
  }

  async close(): Promise<void> {
    if (!this.ended) await this.iterator.return?.();
  }
}

function toBuffer(value: unknown): Buffer {
  if (Buffer.isBuffer(value)) return value;
  if (typeof value === 'string') return Buffer.from(value);
  return Buffer.from(value as Uint8Array);
}

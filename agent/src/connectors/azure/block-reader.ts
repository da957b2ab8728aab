/**
 * Cuts an async iterable of chunks into blocks of an asked size. The Azure uploads (blob blocks,
 * file ranges) share it: each piece is held whole for its Content-MD5 and its one request.
 */
export class BlockReader {
  private readonly iterator: AsyncIterator<unknown>;
  private leftover: Buffer | null = null;
  private ended = false;

  constructor(body: AsyncIterable<unknown>) {
    this.iterator = body[Symbol.asyncIterator]();
  }

  /** The next `size` bytes (fewer at the end), or null when the body is exhausted. */
  async next(size: number): Promise<Buffer | null> {
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
    if (have === 0) return null;
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, have);
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

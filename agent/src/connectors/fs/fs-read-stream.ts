import { Readable } from 'node:stream';
import type { FileHandle } from 'node:fs/promises';
import { fsError } from './fs-errors.js';

const CHUNK_BYTES = 256 * 1024;

/**
 * Reads `[start, end]` of an open file. A class of its own rather than fs.createReadStream so
 * that every error the stream emits, aborts included, is a ConnectorError (the contract), and
 * the handle is closed exactly once whatever ends the stream.
 */
export class FileReadStream extends Readable {
  private position: number;

  constructor(
    private readonly handle: FileHandle,
    private readonly path: string,
    start: number,
    private readonly end: number,
  ) {
    super({ highWaterMark: CHUNK_BYTES });
    this.position = start;
  }

  override _read(size: number): void {
    const want = Math.min(size, CHUNK_BYTES, this.end - this.position + 1);
    if (want <= 0) {
      this.push(null);
      return;
    }
    const buffer = Buffer.allocUnsafe(want);
    this.handle.read(buffer, 0, want, this.position).then(
      ({ bytesRead }) => {
        if (bytesRead === 0) {
          this.push(null);
          return;
        }
        this.position += bytesRead;
        this.push(bytesRead < want ? buffer.subarray(0, bytesRead) : buffer);
      },
      (err: unknown) => this.destroy(fsError(err, this.path)),
    );
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    const mapped = err ? fsError(err, this.path) : null;
    this.handle.close().then(
      () => callback(mapped),
      () => callback(mapped),
    );
  }
}

import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { SourceChangedError } from './errors.js';

const HIGH_WATER_MARK = 512 * 1024;

export interface HashingOptions {
  /** Also compute MD5 (to compare with an MD5 or plain ETag the destination reports). */
  md5: boolean;
  /** Bytes the listing announced: more than this is a source that changed mid-copy. */
  expectedBytes: number;
  /** Called with each chunk's length as it passes (progress). */
  onBytes?: (bytes: number) => void;
}

/**
 * Pass-through that hashes every byte in flight (SHA-256, optionally MD5) and counts them, so
 * verification needs no second read of the source. It fails as soon as the source yields more
 * bytes than listed.
 */
export class HashingStream extends Transform {
  private readonly sha256: Hash = createHash('sha256');
  private readonly md5: Hash | null;
  bytes = 0;
  /** Why the stream failed on the source's account (changed size), if it did. */
  sourceError: Error | null = null;

  constructor(private readonly options: HashingOptions) {
    // Room for a few source chunks (sftp reads 128 KiB at a time): with the 16 KiB default every
    // chunk stopped the source until the destination had taken it, and the source's read-ahead with it.
    super({ highWaterMark: HIGH_WATER_MARK });
    this.md5 = options.md5 ? createHash('md5') : null;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.options.expectedBytes) {
      this.sourceError = new SourceChangedError(`source changed during copy: listed ${this.options.expectedBytes} bytes, read more`);
      callback(this.sourceError);
      return;
    }
    this.sha256.update(chunk);
    this.md5?.update(chunk);
    this.options.onBytes?.(chunk.length);
    callback(null, chunk);
  }

  /** Hex digests; only once the stream has ended. */
  digests(): { sha256: string; md5: string | null } {
    return { sha256: this.sha256.digest('hex'), md5: this.md5?.digest('hex') ?? null };
  }
}

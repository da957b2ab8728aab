import { createHash, type Hash } from 'node:crypto';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { SourceChangedError, VerifyError } from './errors.js';

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
 * A file's bytes whose producer hashes them as it hands them out and checks the SHA-256 before
 * they end (a relay's destination, relay/tar-receiver.ts: against the source agent's SHA-256 of
 * what it read). `sha256` is set before the end: the write side takes it (`HashingStream.takeSha256From`)
 * rather than hash every byte a second time.
 */
export class PreHashedBody extends Readable {
  /** Hex SHA-256 of every byte of the body; set before it ends. */
  sha256: string | null = null;
}

/**
 * Pass-through that hashes every byte in flight (SHA-256, optionally MD5) and counts them, so
 * verification needs no second read of the source. It fails as soon as the source yields more
 * bytes than listed.
 */
export class HashingStream extends Transform {
  private sha256: Hash | null = createHash('sha256');
  /** The body whose own SHA-256 stands for this one's (takeSha256From). */
  private preHashed: PreHashedBody | null = null;
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
    this.sha256?.update(chunk);
    this.md5?.update(chunk);
    this.options.onBytes?.(chunk.length);
    callback(null, chunk);
  }

  /**
   * The SHA-256 is `body`'s own (its producer hashed the same bytes before they came here): this
   * stream computes none. Called before the first byte passes, with the body piped into it.
   */
  takeSha256From(body: PreHashedBody): void {
    if (this.bytes > 0) throw new Error('takeSha256From after bytes passed');
    this.sha256 = null;
    this.preHashed = body;
  }

  /** Hex digests; only once the stream has ended. */
  digests(): { sha256: string; md5: string | null } {
    const sha256 = this.sha256 ? this.sha256.digest('hex') : this.preHashed?.sha256;
    // A pre-hashed body ends only once its SHA-256 is known and checked: without one it did not end.
    if (!sha256) throw new VerifyError('the source ended without the SHA-256 of its bytes');
    return { sha256, md5: this.md5?.digest('hex') ?? null };
  }
}

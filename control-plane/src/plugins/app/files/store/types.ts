import type { Readable } from 'node:stream';

/**
 * The service's own store of uploaded files' content (docs/configuration.md "File store"): a
 * local directory (local.store.ts) or an S3-compatible bucket (s3.store.ts), chosen by
 * `config.fileStore`. Content is written as temporary content first and made permanent only by
 * `PendingObject.commit()`, which the upload route calls once the malware scan passed; until then
 * no key names it, so nothing can read it, and `discard()` (or, after a crash, `sweep`) removes it.
 */
export interface FileStore {
  readonly kind: 'local' | 's3';
  /**
   * Streams `body` into new temporary content that no key names yet. Resolves once every byte is
   * durable there (local: fsync'd; s3: parts uploaded, a body shorter than one part kept in memory
   * until commit) with a PendingObject. On a failing `body`, an aborted `signal` or a storage
   * error, whatever was written is removed and it rejects: with the body's own error, with
   * `signal.reason`, or (storage errors) with ServiceUnavailableError "File storage unavailable:
   * <reason>". The body is destroyed on failure.
   */
  write(body: Readable, signal?: AbortSignal): Promise<PendingObject>;
  /**
   * Opens committed content; `range` is inclusive byte offsets the caller already checked
   * against the size. Rejects with StoredObjectMissingError when there is no such key, and for a
   * key this store could never have made (another backend's, or `../x`): such a key is refused
   * before it reaches the disk or the bucket. Storage errors reject as ServiceUnavailableError.
   */
  read(key: string, range?: { start: number; end: number }): Promise<Readable>;
  /** Deletes committed content; a missing key (or one this store never makes) is fine (idempotent). */
  remove(key: string): Promise<void>;
  /**
   * Removes temporary content older than `olderThanMs` that crashed uploads left (local: temp
   * files by modification time; s3: multipart uploads under the prefix by initiation time);
   * returns how many.
   */
  sweep(olderThanMs: number): Promise<number>;
  /** Releases the store's resources (the S3 client's sockets); the plugin calls it on close. */
  close(): Promise<void>;
}

/** Content written by `FileStore.write`, not yet named by any key. */
export interface PendingObject {
  readonly size: number;
  /**
   * Makes the content permanent and returns its new, unique key (opaque; kept in the file record).
   * Calling it again returns the same key; after `discard()` it rejects. A storage error rejects
   * as ServiceUnavailableError and leaves the content pending (call `discard()`).
   */
  commit(): Promise<string>;
  /**
   * Removes the temporary content; idempotent; never throws. After a successful commit it does
   * nothing; after a failed one it also removes the key the commit may have created.
   */
  discard(): Promise<void>;
}

/** `read` of a key with no content behind it. */
export class StoredObjectMissingError extends Error {
  constructor(key: string) {
    super(`stored object ${JSON.stringify(key.slice(0, 200))} does not exist`);
    this.name = 'StoredObjectMissingError';
  }
}

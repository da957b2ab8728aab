import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { guardWrite as guardWriteOnce } from '@xfer/storage';
import { ServiceUnavailableError } from '../../../../errors.js';
import type { PendingObject } from './types.js';

/** A new object id: 128 random bits as 32 hex digits (collisions are not a practical concern). */
export function newObjectId(): string {
  return randomBytes(16).toString('hex');
}

/** The error every storage failure becomes: the API answers it as 503 with `reason`. */
export function storageUnavailable(reason: string, cause: unknown): ServiceUnavailableError {
  return new ServiceUnavailableError(`File storage unavailable: ${reason}`, cause);
}

/**
 * What both stores' `write` shares around their own streaming (`run`): @xfer/storage's write
 * guard (the agent's connectors use it too). An aborted signal destroys the body, so a stalled
 * source cannot keep the write waiting for its next chunk; the body's errors reach `run` through
 * its iteration, never as an unhandled 'error' event; on any failure the body is destroyed,
 * `cleanup` removes whatever was written, and the rejection is `signal.reason` when the signal
 * caused it, else what `run` threw (the body's own error as it was, storage errors already made
 * ServiceUnavailableError by the store).
 */
export function guardWrite<T>(body: Readable, signal: AbortSignal | undefined, run: () => Promise<T>, cleanup?: () => Promise<unknown>): Promise<T> {
  return guardWriteOnce(body, { signal, aborted: () => abortReason(signal!), destroyWithAbort: false, cleanup }, run);
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new Error('the write was aborted');
}

/** The body's chunks as Buffers (a stream in string mode yields strings). */
export async function* chunksOf(body: Readable): AsyncGenerator<Buffer> {
  for await (const chunk of body as AsyncIterable<unknown>) {
    if (Buffer.isBuffer(chunk)) yield chunk;
    else if (typeof chunk === 'string') yield Buffer.from(chunk);
    else yield Buffer.from(chunk as Uint8Array);
  }
}

/**
 * The life of a PendingObject, the same in both stores: commit and discard run one at a time, so
 * a discard racing a commit sees its outcome (and keeps committed content) instead of pulling the
 * temporary content away mid-way; a second commit returns the first key; a discard after a failed
 * commit also removes what that commit may have created before failing.
 */
export abstract class PendingContent implements PendingObject {
  private state: 'pending' | 'committed' | 'discarded' = 'pending';
  private committedKey: string | null = null;
  private commitAttempted = false;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(readonly size: number) {}

  commit(): Promise<string> {
    return this.serial(async () => {
      if (this.state === 'committed') return this.committedKey!;
      if (this.state === 'discarded') throw new Error('commit after discard: the temporary content was removed');
      this.commitAttempted = true;
      const key = await this.persist();
      this.committedKey = key;
      this.state = 'committed';
      return key;
    });
  }

  discard(): Promise<void> {
    return this.serial(async () => {
      if (this.state !== 'pending') return;
      this.state = 'discarded';
      await this.removeTemporary(this.commitAttempted).catch(() => undefined);
    });
  }

  /** Makes the content permanent under its key and returns the key. */
  protected abstract persist(): Promise<string>;
  /** Removes the temporary content, and the key too when a commit was tried (it may have got that far). */
  protected abstract removeTemporary(commitAttempted: boolean): Promise<void>;

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.queue.then(fn);
    this.queue = next.catch(() => undefined);
    return next;
  }
}

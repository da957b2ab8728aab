import { backoffDelayMs } from '@xfer/shared';
import { sleep } from '../lib/sleep.js';
import { isRetryable } from './errors.js';

export interface RetryOptions {
  retries: number;
  baseMs: number;
  maxMs: number;
  signal: AbortSignal;
  /** Told before each wait (logging). */
  onRetry?: (err: unknown, attempt: number, delayMs: number) => void;
}

/**
 * Runs `attempt` until it succeeds, fails with a non-retryable error, runs out of retries, or
 * the signal aborts. Waits with exponential backoff and full jitter between attempts.
 * Rejects with the last error (with the signal's reason when it was aborted before an attempt).
 */
export async function withRetries<T>(attempt: (n: number) => Promise<T>, options: RetryOptions): Promise<T> {
  for (let n = 0; ; n++) {
    try {
      // No attempt starts after an abort: a cancel must not open new streams or touch the stores.
      options.signal.throwIfAborted();
      return await attempt(n);
    } catch (err) {
      if (options.signal.aborted || n >= options.retries || !isRetryable(err)) {
        throw err;
      }
      const delayMs = backoffDelayMs(n, options.baseMs, options.maxMs);
      options.onRetry?.(err, n + 1, delayMs);
      await sleep(delayMs, options.signal);
    }
  }
}

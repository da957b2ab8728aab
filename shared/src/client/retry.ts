/** When and how long the client waits before trying a call again. */
import { backoffDelayMs } from '../backoff.js';

/** Methods that may be sent twice without changing the outcome (RFC 9110 §9.2.2). */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

export function isIdempotent(method: string): boolean {
  return IDEMPOTENT.has(method.toUpperCase());
}

/** Backoff settings; every field has a default suited to a CLI. */
export interface BackoffOptions {
  /** First backoff ceiling; doubles per attempt. Default 500 ms. */
  baseMs?: number;
  /** Largest backoff ceiling. Default 30 s. */
  maxMs?: number;
  /**
   * A `Retry-After` longer than this is not waited out: the call fails at once with the server's
   * figure in `retryAfterSeconds`, rather than hanging a script. Default 120 s.
   */
  maxRetryAfterMs?: number;
}

export const DEFAULT_BACKOFF: Required<BackoffOptions> = { baseMs: 500, maxMs: 30_000, maxRetryAfterMs: 120_000 };

/**
 * `Retry-After` in milliseconds: delta-seconds or an HTTP date (RFC 9110 §10.2.3); undefined when
 * absent or unreadable. A date in the past means now.
 */
export function parseRetryAfter(value: string | null | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/**
 * Delay before retry number `retry` (1-based): the server's `Retry-After` as a floor, plus "full
 * jitter" — a random share of an exponentially growing, capped ceiling — so clients refused
 * together do not all come back in the same instant.
 */
export function retryDelayMs(retry: number, retryAfterMs: number | undefined, opts: Required<BackoffOptions>, random = Math.random): number {
  return (retryAfterMs ?? 0) + backoffDelayMs(retry - 1, opts.baseMs, opts.maxMs, random);
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

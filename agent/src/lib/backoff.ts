import { setTimeout as delay } from 'node:timers/promises';

/**
 * Exponential backoff with full jitter: a uniformly random wait in [0, min(maxMs, baseMs·2^attempt)].
 * Full jitter spreads reconnecting agents (and retrying files) apart instead of letting them
 * retry in lockstep after a shared outage.
 */
export function backoffDelayMs(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.floor(random() * ceiling);
}

/** Successive backoff delays; `reset()` after a success starts again from `baseMs`. */
export class Backoff {
  private attempt = 0;

  constructor(
    private readonly baseMs: number,
    private readonly maxMs: number,
    private readonly random: () => number = Math.random,
  ) {}

  next(): number {
    return backoffDelayMs(this.attempt++, this.baseMs, this.maxMs, this.random);
  }

  reset(): void {
    this.attempt = 0;
  }
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts. */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  await delay(ms, undefined, { signal });
}

/**
 * Exponential backoff with full jitter, written once for every retry loop of the platform: the
 * API client's retries, the agent's reconnects and file retries, the control plane's webhook
 * deliveries. Each caller keeps its own base and cap.
 */

/**
 * Wait before attempt `attempt` (0-based: the wait after the first failure is attempt 0): a
 * uniformly random whole number of milliseconds in [0, min(maxMs, baseMs·2^attempt)]. Full
 * jitter spreads clients, agents and deliveries that failed together (a shared outage, a
 * receiver coming back) instead of letting them retry in lockstep.
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

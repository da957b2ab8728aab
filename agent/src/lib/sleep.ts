import { setTimeout as delay } from 'node:timers/promises';

/** Waits `ms`, or rejects (AbortError, the reason as its cause) as soon as the signal aborts. */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  await delay(ms, undefined, { signal });
}

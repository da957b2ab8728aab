import type { Readable } from 'node:stream';

/** How a write ends on abort and on failure: the caller's own errors and cleanup. */
export interface WriteGuardOptions {
  signal?: AbortSignal;
  /** The error an abort ends the write with. */
  aborted: () => unknown;
  /**
   * Whether an abort destroys the body with `aborted()` (the writer's iteration then fails with
   * it) or plainly (default true).
   */
  destroyWithAbort?: boolean;
  /** What any other failure becomes (default: thrown as it is). */
  mapError?: (err: unknown) => unknown;
  /** Removes what was written, after a failure (its own errors are ignored: the write fails anyway). */
  cleanup?: (err: unknown) => Promise<unknown>;
  /**
   * The stream an abort destroys, when the writer reads the body through a stream of its own
   * (ftp's upload source): destroying that one wakes a writer stalled on a full socket, which the
   * body's destruction would not. Default the body.
   */
  abortTarget?: Readable;
}

/**
 * What every streaming write shares around its own work (`run`), in the agent's connectors and
 * the control plane's file store: an abort destroys the body, so a stalled source cannot keep
 * the write waiting for its next chunk; the body's errors reach `run` through its iteration,
 * never as an unhandled 'error' event before it starts; on any failure the body is destroyed,
 * `cleanup` removes what was written, and the rejection is `aborted()` when the signal caused it,
 * else what `mapError` makes of the error.
 */
export async function guardWrite<T>(body: Readable, o: WriteGuardOptions, run: () => Promise<T>): Promise<T> {
  const { signal } = o;
  if (signal?.aborted) {
    body.destroy();
    throw o.aborted();
  }
  const ignore = () => undefined;
  body.on('error', ignore);
  const target = o.abortTarget ?? body;
  const onAbort = () => (o.destroyWithAbort === false ? target.destroy() : target.destroy(o.aborted() as Error));
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await run();
  } catch (err) {
    body.destroy();
    await o.cleanup?.(err).catch(() => undefined);
    if (signal?.aborted) throw o.aborted();
    throw o.mapError ? o.mapError(err) : err;
  } finally {
    signal?.removeEventListener('abort', onAbort);
    body.off('error', ignore);
  }
}

/**
 * A bounded window of requests in flight: the one pipelining rule of every upload and pipelined
 * write (S3 parts, Azure blocks and ranges, SFTP/NFS/SMB WRITEs, the control plane's S3 store).
 * The caller reads its next piece while up to `limit` requests run, waits for a free slot, starts
 * the next one; the first failure ends the run, and nothing is left running past it.
 *
 * Tasks are tracked through a wrapper that never rejects, so a failure is never unhandled, and
 * is reported once (the first), however many tasks fail after it.
 */
export class InflightWindow {
  private readonly inflight = new Set<Promise<void>>();
  private failure: { err: unknown } | undefined;

  /** @param limit requests in flight at most (at least 1). */
  constructor(readonly limit: number) {}

  /** Requests running now. */
  get size(): number {
    return this.inflight.size;
  }

  /** True once a request failed (the window is done: `check` throws). */
  get failed(): boolean {
    return this.failure !== undefined;
  }

  /**
   * Tracks a request already started. Its outcome goes to the window: a rejection is recorded as
   * the window's failure (the first one wins), a value to `onDone` (collecting part ETags).
   */
  add<T>(request: Promise<T>, onDone?: (value: T) => void): void {
    const done: Promise<void> = request
      .then(
        (value) => onDone?.(value),
        (err: unknown) => void (this.failure ??= { err }),
      )
      .finally(() => this.inflight.delete(done));
    this.inflight.add(done);
  }

  /** Throws the first failure, if any. */
  check(): void {
    if (this.failure) throw this.failure.err;
  }

  /** Resolves once fewer than `limit` requests run; throws the first failure (also one met while waiting). */
  async slot(): Promise<void> {
    while (this.inflight.size >= this.limit && !this.failure) await Promise.race(this.inflight);
    this.check();
  }

  /** Waits for every request, then throws the first failure, if any. */
  async drain(): Promise<void> {
    await Promise.all(this.inflight);
    this.check();
  }

  /**
   * Waits for every request to settle, never throwing: on the failure path, before the caller
   * closes a handle or removes what was written, so that no request still runs under it.
   */
  async settle(): Promise<void> {
    await Promise.all(this.inflight);
  }
}

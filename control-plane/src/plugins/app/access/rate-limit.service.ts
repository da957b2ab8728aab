import type { FastifyBaseLogger, FastifyReply } from 'fastify';
import { randomUUID } from 'node:crypto';
import { Messages } from '@xfer/shared';
import { RateLimitedError } from '../../../errors.js';
import type { Models } from '../../../models/index.js';

/** The API budget per account (or address) and minute, and how often instances reconcile it. */
export interface RateLimitOptions {
  perMinute: number;
  /** How often the shared budgets are reconciled through the database. */
  syncMs: number;
}

/** What the rate limiter needs besides its budget: where shared counts are reconciled. */
export interface RateLimitServiceOptions extends RateLimitOptions {
  db: Pick<Models, 'rateLimitCounts'>;
  log: FastifyBaseLogger;
}

const WINDOW_MS = 60_000;
/** Budgets of an account are shared by every instance; address budgets stay per instance. */
const SHARED_PREFIX = 'account:';

interface Counter {
  /** Requests this instance admitted in the window. */
  local: number;
  /** `local` as last written to the database. */
  written: number;
  /** What the other instances had admitted, as of the last reconciliation. */
  others: number;
}

/**
 * Fixed one-minute windows counted in memory: a request costs a Map lookup, never a database
 * write. Account budgets are reconciled every `syncMs`: each instance writes its own count per
 * key and window (one document it alone writes, so FerretDB's non-atomic updates cannot lose
 * anything) and reads the others' counts. Exact on one instance; across instances, the overshoot
 * is bounded by what the others admitted since the counts last met (docs/security.md "Rate
 * limits"). Address budgets (unauthenticated calls, share links) never reach the database.
 * `start` runs the reconciliation and sweep timers; `close` stops them.
 */
export class RateLimitService {
  private readonly model: Models['rateLimitCounts'];
  private readonly log: FastifyBaseLogger;
  private readonly perMinute: number;
  private readonly syncMs: number;
  private readonly instance = randomUUID();
  private windowStart = 0;
  /** The current window's counters: shared (account) keys apart, so a reconciliation never walks the address keys. */
  private shared = new Map<string, Counter>();
  private local = new Map<string, Counter>();
  private running: Promise<void> | null = null;
  /** Windows this instance wrote counts for since its last sweep: an idle instance sweeps nothing. */
  private unswept = false;
  private timers: NodeJS.Timeout[] = [];

  constructor(opts: RateLimitServiceOptions) {
    this.model = opts.db.rateLimitCounts;
    this.log = opts.log;
    this.perMinute = opts.perMinute;
    this.syncMs = opts.syncMs;
  }

  /**
   * Counts one request against `key`, sets the RateLimit-* headers, throws 429 past the limit.
   * `perMinute` defaults to the API limit; a route with its own budget (the share-link download)
   * passes its own, under a key of its own. Never touches the database.
   */
  async consume(key: string, reply: FastifyReply, perMinute = this.perMinute): Promise<void> {
    const now = Date.now();
    const c = this.counter(key, now);
    const used = c.local + c.others;
    const admitted = used < perMinute;
    if (admitted) c.local++;
    const resetSeconds = Math.max(1, Math.ceil((this.windowStart + WINDOW_MS - now) / 1000));
    reply.header('ratelimit-limit', String(perMinute));
    reply.header('ratelimit-remaining', String(admitted ? perMinute - used - 1 : 0));
    reply.header('ratelimit-reset', String(resetSeconds));
    if (!admitted) throw new RateLimitedError(Messages.rateLimited, resetSeconds);
  }

  /** One reconciliation with the other instances now (the timer does it every `syncMs`). */
  sync(): Promise<void> {
    return (this.running ??= this.reconcile().finally(() => (this.running = null)));
  }

  /** Starts reconciling every `syncMs`, and sweeping expired windows once a minute after writing some. */
  start(): void {
    const timer = setInterval(() => {
      this.sync().catch((err: unknown) => this.log.warn({ err }, 'rate-limit reconciliation failed'));
    }, this.syncMs);
    // Each instance sweeps what it wrote and any other's; deleteMany is idempotent.
    const sweeper = setInterval(() => {
      if (!this.unswept) return;
      this.unswept = false;
      this.model.deleteMany({ expires_at: { $lt: new Date() } }).catch((err: unknown) => this.log.debug({ err }, 'rate-limit sweep failed'));
    }, WINDOW_MS);
    this.timers = [timer, sweeper];
    for (const t of this.timers) t.unref();
  }

  /** Stops the timers and waits for a reconciliation under way. */
  async close(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    await this.running?.catch(() => {});
  }

  /** The counter of `key` in the current window (fresh maps when a window begins). */
  private counter(key: string, now: number): Counter {
    const start = now - (now % WINDOW_MS);
    if (start !== this.windowStart) {
      this.windowStart = start;
      this.shared = new Map();
      this.local = new Map();
    }
    const map = key.startsWith(SHARED_PREFIX) ? this.shared : this.local;
    let c = map.get(key);
    if (!c) map.set(key, (c = { local: 0, written: 0, others: 0 }));
    return c;
  }

  private async reconcile(): Promise<void> {
    const window = new Date(this.windowStart);
    const active = [...this.shared];
    if (!active.length) return;
    const dirty = active.filter(([, c]) => c.local > c.written).map(([key, c]) => ({ key, c, count: c.local }));
    if (dirty.length) {
      const expiresAt = new Date(window.getTime() + 2 * WINDOW_MS);
      await this.model.bulkWrite(dirty.map(({ key, count }) => ({
        updateOne: { filter: { key, window_start: window, instance: this.instance }, update: { $set: { count, expires_at: expiresAt } }, upsert: true },
      })), { ordered: false });
      for (const { c, count } of dirty) c.written = Math.max(c.written, count);
      this.unswept = true;
    }
    const rows = await this.model
      .find({ key: { $in: active.map(([key]) => key) }, window_start: window, instance: { $ne: this.instance } }, { key: 1, count: 1, _id: 0 })
      .lean();
    const others = new Map<string, number>();
    for (const row of rows) others.set(row.key, (others.get(row.key) ?? 0) + row.count);
    for (const [key, c] of active) c.others = others.get(key) ?? 0;
  }
}

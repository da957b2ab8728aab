import fp from 'fastify-plugin';
import type { FastifyReply } from 'fastify';
import { randomUUID } from 'node:crypto';
import { Messages } from '@xfer/shared';
import { RateLimitedError } from '../../../errors.js';

export interface RateLimiter {
  /**
   * Counts one request against `key`, sets the RateLimit-* headers, throws 429 past the limit.
   * `perMinute` defaults to the API limit; a route with its own budget (the share-link download)
   * passes its own, under a key of its own. Never touches the database.
   */
  consume(key: string, reply: FastifyReply, perMinute?: number): Promise<void>;
  /** One reconciliation with the other instances now (the timer does it every `syncMs`). */
  sync(): Promise<void>;
}

declare module 'fastify' {
  interface FastifyInstance {
    rateLimiter: RateLimiter;
  }
}

export interface RateLimitOptions {
  perMinute: number;
  /** How often the shared budgets are reconciled through the database. */
  syncMs: number;
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
 */
export default fp<RateLimitOptions>(
  async (app, opts) => {
    const model = app.db.rateLimitCounts;
    const instance = randomUUID();
    let windowStart = 0;
    /** The current window's counters: shared (account) keys apart, so a reconciliation never walks the address keys. */
    let shared = new Map<string, Counter>();
    let local = new Map<string, Counter>();

    /** The counter of `key` in the current window (fresh maps when a window begins). */
    function counter(key: string, now: number): Counter {
      const start = now - (now % WINDOW_MS);
      if (start !== windowStart) {
        windowStart = start;
        shared = new Map();
        local = new Map();
      }
      const map = key.startsWith(SHARED_PREFIX) ? shared : local;
      let c = map.get(key);
      if (!c) map.set(key, (c = { local: 0, written: 0, others: 0 }));
      return c;
    }

    let running: Promise<void> | null = null;
    /** Windows this instance wrote counts for since its last sweep: an idle instance sweeps nothing. */
    let unswept = false;
    async function reconcile(): Promise<void> {
      const window = new Date(windowStart);
      const active = [...shared];
      if (!active.length) return;
      const dirty = active.filter(([, c]) => c.local > c.written).map(([key, c]) => ({ key, c, count: c.local }));
      if (dirty.length) {
        const expiresAt = new Date(window.getTime() + 2 * WINDOW_MS);
        await model.bulkWrite(dirty.map(({ key, count }) => ({
          updateOne: { filter: { key, window_start: window, instance }, update: { $set: { count, expires_at: expiresAt } }, upsert: true },
        })), { ordered: false });
        for (const { c, count } of dirty) c.written = Math.max(c.written, count);
        unswept = true;
      }
      const rows = await model
        .find({ key: { $in: active.map(([key]) => key) }, window_start: window, instance: { $ne: instance } }, { key: 1, count: 1, _id: 0 })
        .lean();
      const others = new Map<string, number>();
      for (const row of rows) others.set(row.key, (others.get(row.key) ?? 0) + row.count);
      for (const [key, c] of active) c.others = others.get(key) ?? 0;
    }
    const sync = () => (running ??= reconcile().finally(() => (running = null)));

    app.decorate<RateLimiter>('rateLimiter', {
      async consume(key, reply, perMinute = opts.perMinute) {
        const now = Date.now();
        const c = counter(key, now);
        const used = c.local + c.others;
        const admitted = used < perMinute;
        if (admitted) c.local++;
        const resetSeconds = Math.max(1, Math.ceil((windowStart + WINDOW_MS - now) / 1000));
        reply.header('ratelimit-limit', String(perMinute));
        reply.header('ratelimit-remaining', String(admitted ? perMinute - used - 1 : 0));
        reply.header('ratelimit-reset', String(resetSeconds));
        if (!admitted) throw new RateLimitedError(Messages.rateLimited, resetSeconds);
      },
      sync,
    });

    const timer = setInterval(() => {
      sync().catch((err: unknown) => app.log.warn({ err }, 'rate-limit reconciliation failed'));
    }, opts.syncMs);
    timer.unref();
    // Sweep expired windows once a minute after writing some (each instance sweeps what it wrote
    // and any other's; deleteMany is idempotent).
    const sweeper = setInterval(() => {
      if (!unswept) return;
      unswept = false;
      model.deleteMany({ expires_at: { $lt: new Date() } }).catch((err: unknown) => app.log.debug({ err }, 'rate-limit sweep failed'));
    }, WINDOW_MS);
    sweeper.unref();
    app.addHook('onClose', async () => {
      clearInterval(timer);
      clearInterval(sweeper);
      await running?.catch(() => {});
    });
  },
  { name: 'rate-limit', dependencies: ['mongoose'] },
);

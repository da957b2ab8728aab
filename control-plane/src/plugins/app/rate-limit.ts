import fp from 'fastify-plugin';
import type { FastifyReply } from 'fastify';
import { Messages } from '@xfer/shared';
import { RateLimitedError } from '../../errors.js';

export interface RateLimiter {
  /**
   * Counts one request against `key`, sets the RateLimit-* headers, throws 429 past the limit.
   * `perMinute` defaults to the API limit; a route with its own budget (the share-link download)
   * passes its own, under a key of its own.
   */
  consume(key: string, reply: FastifyReply, perMinute?: number): Promise<void>;
}

declare module 'fastify' {
  interface FastifyInstance {
    rateLimiter: RateLimiter;
  }
}

export interface RateLimitOptions {
  perMinute: number;
}

const WINDOW_MS = 60_000;

/**
 * Fixed one-minute windows counted in the database, so every control-plane instance sharing it
 * enforces the same budget per account. Each counted request claims the next free slot number of
 * its window through a unique index (models/rate-limit-slot.model.ts): exact under any
 * concurrency, on MongoDB and on FerretDB, whose updates are not atomic.
 */
export default fp<RateLimitOptions>(
  async (app, opts) => {
    const slots = app.db.rateLimitSlots;

    /** The slot this request got (1-based), or null when the window's budget is spent. */
    async function claimSlot(key: string, windowStart: Date, limit: number): Promise<number | null> {
      const taken = await slots.countDocuments({ key, window_start: windowStart });
      const expiresAt = new Date(windowStart.getTime() + 2 * WINDOW_MS);
      // Requests racing for one slot: one wins, the others move on to the next.
      for (let slot = taken + 1; slot <= limit; slot++) {
        try {
          await slots.create({ key, window_start: windowStart, slot, expires_at: expiresAt });
          return slot;
        } catch (err) {
          if ((err as { code?: number }).code !== 11000) throw err;
        }
      }
      return null;
    }

    app.decorate<RateLimiter>('rateLimiter', {
      async consume(key, reply, perMinute = opts.perMinute) {
        const now = Date.now();
        const windowStart = new Date(now - (now % WINDOW_MS));
        const slot = await claimSlot(key, windowStart, perMinute);
        const resetSeconds = Math.max(1, Math.ceil((windowStart.getTime() + WINDOW_MS - now) / 1000));
        reply.header('ratelimit-limit', String(perMinute));
        reply.header('ratelimit-remaining', String(slot === null ? 0 : perMinute - slot));
        reply.header('ratelimit-reset', String(resetSeconds));
        if (slot === null) throw new RateLimitedError(Messages.rateLimited, resetSeconds);
      },
    });

    // Sweep expired windows; deleteMany is idempotent, so every instance may run it.
    const timer = setInterval(() => {
      slots.deleteMany({ expires_at: { $lt: new Date() } }).catch((err: unknown) => app.log.debug({ err }, 'rate-limit sweep failed'));
    }, WINDOW_MS);
    timer.unref();
    app.addHook('onClose', async () => clearInterval(timer));
  },
  { name: 'rate-limit', dependencies: ['mongoose'] },
);

import fp from 'fastify-plugin';
import type { FastifyReply } from 'fastify';
import { Messages } from '@xfer/shared';
import { RateLimitedError } from '../../errors.js';

export interface RateLimiter {
  /** Counts one request against `key`, sets the RateLimit-* headers, throws 429 past the limit. */
  consume(key: string, reply: FastifyReply): Promise<void>;
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
 * Fixed one-minute windows counted in the database with one atomic upsert per request, so
 * every control-plane instance sharing the database enforces the same budget per account.
 */
export default fp<RateLimitOptions>(
  async (app, opts) => {
    const windows = app.db.rateLimitWindows;

    async function increment(key: string, windowStart: Date): Promise<number> {
      const update = { $inc: { count: 1 }, $setOnInsert: { expires_at: new Date(windowStart.getTime() + 2 * WINDOW_MS) } };
      try {
        const doc = await windows.findOneAndUpdate({ key, window_start: windowStart }, update, { upsert: true, new: true }).lean();
        return doc!.count;
      } catch (err) {
        // Two instances inserting the same new window at once: one loses on the unique index; its retry updates.
        if ((err as { code?: number }).code !== 11000) throw err;
        const doc = await windows.findOneAndUpdate({ key, window_start: windowStart }, update, { new: true }).lean();
        return doc!.count;
      }
    }

    app.decorate<RateLimiter>('rateLimiter', {
      async consume(key, reply) {
        const now = Date.now();
        const windowStart = new Date(now - (now % WINDOW_MS));
        const count = await increment(key, windowStart);
        const resetSeconds = Math.max(1, Math.ceil((windowStart.getTime() + WINDOW_MS - now) / 1000));
        reply.header('ratelimit-limit', String(opts.perMinute));
        reply.header('ratelimit-remaining', String(Math.max(0, opts.perMinute - count)));
        reply.header('ratelimit-reset', String(resetSeconds));
        if (count > opts.perMinute) throw new RateLimitedError(Messages.rateLimited, resetSeconds);
      },
    });

    // Sweep expired windows; deleteMany is idempotent, so every instance may run it.
    const timer = setInterval(() => {
      windows.deleteMany({ expires_at: { $lt: new Date() } }).catch((err: unknown) => app.log.debug({ err }, 'rate-limit sweep failed'));
    }, WINDOW_MS);
    timer.unref();
    app.addHook('onClose', async () => clearInterval(timer));
  },
  { name: 'rate-limit', dependencies: ['mongoose'] },
);

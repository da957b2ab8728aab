import fp from 'fastify-plugin';
import { RateLimitService, type RateLimitOptions } from './rate-limit.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    rateLimiter: RateLimitService;
  }
}

/** The API's request budgets (rate-limit.service.ts), counted in memory and reconciled through the database. */
export default fp<RateLimitOptions>(
  async (app, opts) => {
    const limiter = new RateLimitService({ db: app.db, log: app.log, perMinute: opts.perMinute, syncMs: opts.syncMs });
    app.decorate('rateLimiter', limiter);
    limiter.start();
    app.addHook('onClose', () => limiter.close());
  },
  { name: 'rate-limit', dependencies: ['mongoose'] },
);

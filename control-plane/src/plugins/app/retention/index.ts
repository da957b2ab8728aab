import fp from 'fastify-plugin';
import { RetentionService } from './retention.service.js';

export { RetentionService, type AccountRetention, type SweepReport } from './retention.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    retention: RetentionService;
  }
}

/**
 * The retention sweeper (`app.retention`, retention.service.ts): runs while the app is up, from
 * ready until close, and stops before the file store and the database do.
 */
export default fp(
  async (app) => {
    const retention = new RetentionService({ db: app.db, store: app.fileStore, audit: app.audit, config: app.config.retention, log: app.log });
    app.decorate('retention', retention);
    app.addHook('onReady', async () => retention.start());
    app.addHook('preClose', () => retention.stop());
  },
  { name: 'retention', dependencies: ['mongoose', 'audit', 'file-store'] },
);

import fp from 'fastify-plugin';
import { JobService } from './transfer-states.js';

declare module 'fastify' {
  interface FastifyInstance {
    jobs: JobService;
  }
}

/** The transfer job state machine (job-service.ts), shared by the routes, the agent hub and the dispatcher. */
export default fp(
  async (app) => {
    app.decorate('jobs', new JobService({ db: app.db, outbox: app.outbox, leaseMs: app.config.jobLeaseMs, log: app.log }));
  },
  { name: 'jobs', dependencies: ['mongoose', 'outbox'] },
);

import fp from 'fastify-plugin';
import { ActivityService } from './activity.service.js';

export { ActivityService } from './activity.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    activity: ActivityService;
  }
}

/** Reads of the audit trail (activity.service.ts). */
export default fp(
  async (app) => {
    app.decorate('activity', new ActivityService({ db: app.db }));
  },
  { name: 'activity', dependencies: ['mongoose'] },
);

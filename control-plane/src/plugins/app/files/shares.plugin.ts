import fp from 'fastify-plugin';
import { SharesService } from './shares.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    shares: SharesService;
  }
}

/** Decorates `app.shares` (shares.service.ts): share links of the files `app.files` keeps. */
export default fp(
  async (app) => {
    app.decorate('shares', new SharesService({ db: app.db, files: app.files }));
  },
  { name: 'shares', dependencies: ['mongoose', 'files'] },
);

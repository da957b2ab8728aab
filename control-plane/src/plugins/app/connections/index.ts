import fp from 'fastify-plugin';
import { ConnectionsService } from './connections.service.js';

export { ConnectionsService } from './connections.service.js';
export { ownedConnectionId } from './owned.js';
export type { BeforeWrite, RotationOutcome, StoredConnection } from './connections.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    connections: ConnectionsService;
  }
}

/** The connections service: the routes, and the agent gateway (settings for an agent, rotated credentials). */
export default fp(
  async (app) => {
    app.decorate('connections', new ConnectionsService({ db: app.db, vault: app.vault }));
  },
  { name: 'connections', dependencies: ['mongoose'] },
);

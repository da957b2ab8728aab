import type { FastifyPluginAsync } from 'fastify';

/** GET /health: a bare object (api.md), 503 naming what is down. */
const health: FastifyPluginAsync = async (app) => {
  app.get('/health', { config: { access: { public: true, unlimited: true } } }, async (_request, reply) => {
    try {
      const db = app.dbConnection.db;
      if (!db) throw new Error('not connected');
      await db.command({ ping: 1 }, { timeoutMS: app.config.dbTimeoutMs });
      return { status: 'ok' };
    } catch {
      return reply.code(503).send({ status: 'unavailable', error: 'Database unavailable', checks: { database: 'down' } });
    }
  });
};

export default health;

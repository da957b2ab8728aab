import type { FastifyPluginAsync } from 'fastify';
import { Type } from '@sinclair/typebox';

const Healthy = Type.Object({ status: Type.Literal('ok') });
const Unavailable = Type.Object({
  status: Type.Literal('unavailable'), error: Type.String(), checks: Type.Object({ database: Type.Literal('down') }),
});

/** GET /health: a bare object (api.md), 503 naming what is down. */
const health: FastifyPluginAsync = async (app) => {
  app.get('/health', {
    schema: { response: { 200: Healthy, 503: Unavailable } },
    config: { access: { public: true, unlimited: true } },
  }, async (_request, reply) => {
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

import type { FastifyPluginAsync } from 'fastify';
import { bearerMatches } from '@xfer/shared/metrics-listener';
import { UnauthorizedError } from '../../errors.js';

/**
 * GET /metrics on the main port, outside /api/v1 (Prometheus's default path), registered only
 * when XFER_METRICS_TOKEN is set and XFER_METRICS_PORT is not (plugins/app/metrics/ serves the
 * separate port). Public to the session/API-key check, guarded by its own bearer token instead;
 * still rate-limited per address like every public route. Hidden from the OpenAPI document: it
 * is no part of the API.
 */
const metricsRoutes: FastifyPluginAsync = async (app) => {
  const { token, port } = app.config.metrics;
  if (token === null || port !== null) return;
  app.get('/metrics', {
    schema: { hide: true },
    config: { access: { public: true } },
  }, async (request, reply) => {
    if (!bearerMatches(request.headers.authorization, token)) {
      void reply.header('www-authenticate', 'Bearer');
      throw new UnauthorizedError('A valid metrics token is required');
    }
    return reply.type(app.metrics.contentType).send(await app.metrics.render());
  });
};

export default metricsRoutes;

import fp from 'fastify-plugin';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MetricsService } from './metrics.service.js';
import { bearerMatches } from './bearer.js';

export { MetricsService, type ScanOutcome, type WebhookOutcome } from './metrics.service.js';
export { bearerMatches } from './bearer.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Prometheus metrics of this instance (metrics.service.ts). */
    metrics: MetricsService;
    /** The separate metrics listener's address once listening (XFER_METRICS_PORT), else null. */
    metricsAddress: AddressInfo | null;
  }
}

/**
 * The metrics domain: `app.metrics`, the request histogram (an onResponse hook on every route,
 * labelled with the route's pattern: a share link's token is part of its URL), and, when
 * XFER_METRICS_PORT is set, a listener of its own serving only `GET /metrics` (a bare node:http
 * server: it has no other route, no body, no session). On the main port, `/metrics` is a route
 * (routes/metrics/), served only when the port is not set and a token is.
 */
export default fp(
  async (app) => {
    const metrics = new MetricsService({ db: app.db });
    app.decorate('metrics', metrics);
    app.decorate<AddressInfo | null>('metricsAddress', null);

    app.addHook('onResponse', async (request, reply) => {
      // A request no route matched (404) has no pattern: one label for all of them.
      const route = request.routeOptions.url ?? 'unmatched';
      metrics.httpRequest(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
    });

    const { port, host, token } = app.config.metrics;
    if (port === null) return;
    const server: Server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'Not found' }));
        return;
      }
      if (token !== null && !bearerMatches(req.headers.authorization, token)) {
        res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' }).end(JSON.stringify({ error: 'Unauthorized' }));
        return;
      }
      metrics.render().then(
        (text) => res.writeHead(200, { 'content-type': metrics.contentType }).end(req.method === 'HEAD' ? undefined : text),
        (err: unknown) => {
          app.log.warn({ err }, 'metrics scrape failed');
          res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'Metrics unavailable' }));
        },
      );
    });
    app.addHook('onReady', async () => {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
      app.metricsAddress = server.address() as AddressInfo;
      app.log.info({ metrics: `http://${host}:${app.metricsAddress.port}/metrics` }, 'metrics listening');
    });
    app.addHook('onClose', async () => {
      if (!server.listening) return;
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
  },
  { name: 'metrics', dependencies: ['mongoose'] },
);

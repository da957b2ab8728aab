import fp from 'fastify-plugin';
import type { AddressInfo } from 'node:net';
import { listenMetrics, type MetricsListener } from '@xfer/shared/metrics-listener';
import { MetricsService } from './metrics.service.js';

export { MetricsService, type RelayEndOutcome, type RelayStats, type ScanOutcome, type WebhookOutcome } from './metrics.service.js';

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
 * XFER_METRICS_PORT is set, a listener of its own serving only `GET /metrics` (@xfer/shared's
 * listenMetrics, started once the app is ready). On the main port, `/metrics` is a route
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
    let listener: MetricsListener | null = null;
    app.addHook('onReady', async () => {
      listener = await listenMetrics(metrics, { host, port, token, onError: (err) => app.log.warn({ err }, 'metrics scrape failed') });
      app.metricsAddress = listener.address;
      app.log.info({ metrics: `http://${host}:${listener.address.port}/metrics` }, 'metrics listening');
    });
    app.addHook('onClose', async () => {
      await listener?.close();
    });
  },
  { name: 'metrics', dependencies: ['mongoose'] },
);

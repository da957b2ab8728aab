import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { AgentMetrics } from './agent-metrics.js';

/** A listening metrics endpoint; `close()` stops it. */
export interface MetricsServer {
  address: AddressInfo;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` (Prometheus text format) and nothing else on `host:port`. It has no
 * authentication: bind it to loopback (the default) or to a network only the scraper reaches.
 */
export async function serveMetrics(metrics: AgentMetrics, host: string, port: number, log: Logger): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if ((req.url ?? '').split('?')[0] !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    metrics.render().then(
      (text) => res.writeHead(200, { 'content-type': metrics.contentType }).end(req.method === 'HEAD' ? undefined : text),
      (err: unknown) => {
        log.warn({ err }, 'metrics scrape failed');
        res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    address: server.address() as AddressInfo,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

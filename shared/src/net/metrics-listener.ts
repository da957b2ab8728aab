import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What a metrics listener serves: a prom-client registry's text and content type, or anything alike. */
export interface MetricsSource {
  readonly contentType: string;
  render(): Promise<string>;
}

/** Where the listener binds, and its optional bearer token. */
export interface MetricsListenerOptions {
  host: string;
  /** 0: any free port (`address` says which). */
  port: number;
  /** When set, a scrape must send `Authorization: Bearer <token>` (else 401). */
  token?: string | null;
  /** A scrape that failed (answered 500); the listener keeps serving. */
  onError: (err: unknown) => void;
}

/** A listening metrics endpoint. */
export interface MetricsListener {
  readonly address: AddressInfo;
  close(): Promise<void>;
}

const digest = (text: string) => createHash('sha256').update(text).digest();

/**
 * Whether an `Authorization` header carries `Bearer <token>`. Compared as SHA-256 digests with
 * timingSafeEqual: equal lengths whatever was sent, and no early exit that times the prefix.
 */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const given = /^Bearer +(\S+)$/i.exec(header ?? '')?.[1] ?? '';
  return timingSafeEqual(digest(given), digest(token));
}

/**
 * A listener of its own serving `GET /metrics` (Prometheus text format) and nothing else (404),
 * for the control plane's XFER_METRICS_PORT and the agent's --metrics-port. A bare node:http
 * server: no other route, no body read, no session.
 */
export async function listenMetrics(source: MetricsSource, options: MetricsListenerOptions): Promise<MetricsListener> {
  const { token } = options;
  const json = { 'content-type': 'application/json' };
  const server = createServer((req, res) => {
    if ((req.url ?? '').split('?')[0] !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, json).end(JSON.stringify({ error: 'Not found' }));
      return;
    }
    if (token && !bearerMatches(req.headers.authorization, token)) {
      res.writeHead(401, { ...json, 'www-authenticate': 'Bearer' }).end(JSON.stringify({ error: 'A valid metrics token is required' }));
      return;
    }
    source.render().then(
      (text) => res.writeHead(200, { 'content-type': source.contentType }).end(req.method === 'HEAD' ? undefined : text),
      (err: unknown) => {
        options.onError(err);
        res.writeHead(500, json).end(JSON.stringify({ error: 'Metrics unavailable' }));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
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

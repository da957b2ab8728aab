import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Test support for the client's unit tests (not exported by the package): a real HTTP server on
 * a loopback port, so the client is tested through Node's own fetch and sockets, not a mock.
 */

export interface SeenRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
}

export interface TestServer {
  /** `http://127.0.0.1:<port>/api/v1` */
  baseUrl: string;
  origin: string;
  requests: SeenRequest[];
  close(): Promise<void>;
}

export type Handler = (req: IncomingMessage, res: ServerResponse, n: number) => unknown;

/** Answers with `handler`; `n` counts requests from 1. */
export async function serve(handler: Handler): Promise<TestServer> {
  const requests: SeenRequest[] = [];
  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    void Promise.resolve(handler(req, res, requests.length)).catch((err) => res.destroy(err as Error));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    baseUrl: `${origin}/api/v1`,
    origin,
    requests,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/** Sends `body` as JSON with `status` and `headers`. */
export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

/** The whole request body. */
export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A loopback URL where nothing listens (the port was just freed). */
export async function refusedBaseUrl(): Promise<string> {
  const s = await serve(() => undefined);
  await s.close();
  return s.baseUrl;
}

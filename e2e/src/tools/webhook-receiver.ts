import { spawnSync } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A webhook receiver for tests: a real HTTPS server (self-signed certificate made with openssl at
 * test time) that records every request with its raw body and checks its signature the way
 * docs/api.md tells receivers to (HMAC-SHA256 over the raw body, compared in constant time).
 */

/** A self-signed certificate for the names and addresses given (subjectAltName). */
export interface TestCertificate {
  cert: string;
  key: string;
  /** The certificate's file (for NODE_EXTRA_CA_CERTS); removed by `remove()`. */
  certPath: string;
  remove(): void;
}

export function makeTestCertificate(names: { dns?: string[]; ips?: string[] }): TestCertificate {
  const dir = mkdtempSync(join(tmpdir(), 'xfer-webhook-cert-'));
  const keyPath = join(dir, 'key.pem');
  const certPath = join(dir, 'cert.pem');
  const san = [...(names.dns ?? []).map((n) => `DNS:${n}`), ...(names.ips ?? []).map((ip) => `IP:${ip}`)].join(',');
  const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
    '-subj', '/CN=xfer webhook receiver TEST', '-addext', `subjectAltName=${san}`, '-keyout', keyPath, '-out', certPath], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`openssl req failed: ${made.stderr}`);
  return { cert: readFileSync(certPath, 'utf8'), key: readFileSync(keyPath, 'utf8'), certPath, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Constant-time check of `X-Webhook-Signature` (hex HMAC-SHA256 of the raw body). */
export function signatureValid(secret: string, rawBody: Buffer, signature: string | string[] | undefined): boolean {
  if (typeof signature !== 'string' || !/^[0-9a-f]{64}$/.test(signature)) return false;
  const expected = createHmac('sha256', secret).update(rawBody).digest();
  const given = Buffer.from(signature, 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export interface ReceivedRequest {
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** Signature checked against the secret of the request's path; false when the path has none. */
  verified: boolean;
  /** Local address the request arrived on (which of several listening addresses was reached). */
  localAddress: string;
  at: number;
}

/** How to answer: a status (with headers), `hang` (never answer), or `drop` (close the connection). */
export type Answer = { status: number; headers?: Record<string, string> } | 'hang' | 'drop';

export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  /** Secret per path, for signature checks. */
  readonly secrets = new Map<string, string>();
  /** Decides each answer; 204 unless replaced. */
  answer: (req: ReceivedRequest) => Answer = () => ({ status: 204 });
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();

  private constructor(private readonly cert: TestCertificate, readonly host: string, public port: number) {}

  /** Starts listening on `host` (127.0.0.1 by default) and a free port, or the one given. */
  static async start(cert: TestCertificate, host = '127.0.0.1', port = 0): Promise<WebhookReceiver> {
    const receiver = new WebhookReceiver(cert, host, port);
    await receiver.listen();
    return receiver;
  }

  url(path: string, host = this.host): string {
    return `https://${host}:${this.port}${path}`;
  }

  /** Requests to `path`, in arrival order. */
  to(path: string): ReceivedRequest[] {
    return this.requests.filter((r) => r.path === path);
  }

  /** Stops listening and cuts every open connection: senders then get ECONNREFUSED. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Listens again on the same port. */
  async restart(): Promise<void> {
    await this.listen();
  }

  private async listen(): Promise<void> {
    const server = createServer({ cert: this.cert.cert, key: this.cert.key }, (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const path = req.url ?? '/';
        const secret = this.secrets.get(path);
        const received: ReceivedRequest = {
          path, headers: req.headers, body, at: Date.now(), localAddress: req.socket.localAddress ?? '',
          verified: secret !== undefined && signatureValid(secret, body, req.headers['x-webhook-signature']),
        };
        this.requests.push(received);
        const answer = this.answer(received);
        if (answer === 'hang') return;
        if (answer === 'drop') return req.socket.destroy();
        res.writeHead(answer.status, answer.headers).end();
      });
    });
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, this.host, () => resolve());
    });
    this.port = (server.address() as { port: number }).port;
    this.server = server;
  }
}

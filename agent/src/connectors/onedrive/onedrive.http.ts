import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { Agent, request } from 'node:https';
import type { NetworkGuard } from '../network-guard.js';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { graphError, requestError, type GraphErrorBody, type GraphErrorContext } from './onedrive.errors.js';

/** A request body that can be sent again (a retried upload fragment): its length and a way to open it. */
export interface BodySource {
  length: number;
  open(): Readable;
}

export interface HttpRequest {
  method: string;
  /** Absolute `https:` URL. */
  url: string;
  headers?: Record<string, string>;
  body?: string | Buffer | BodySource;
  signal?: AbortSignal;
  ctx: GraphErrorContext;
}

/** An answer; its body must be consumed or discarded. */
export interface HttpResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: IncomingMessage;
  discard(): void;
  text(): Promise<string>;
}

/** Socket inactivity before an answer starts (while a body is sent, the socket is active). */
const ANSWER_TIMEOUT_MS = 120_000;
/** Attempts of one request when the service throttles or fails (429, 5xx). */
export const MAX_ATTEMPTS = 4;
/** A Retry-After longer than this is not waited for: the request fails TRANSIENT and the engine decides. */
const MAX_RETRY_AFTER_MS = 120_000;

/**
 * HTTPS requests over one keep-alive agent, one attempt each (`send`), plus the retry rule of
 * Microsoft Graph's throttling guidance (`sendRetrying`): 429 and 503 (and other 5xx) are sent
 * again after the Retry-After the service asked for — seconds or an HTTP date — or a doubling
 * backoff without one, at most MAX_ATTEMPTS times. No Graph SDK: the connector needs a dozen
 * requests, and streaming bodies through node:https keeps memory bounded.
 */
export class HttpsClient {
  private readonly agent: Agent;

  /**
   * `guard`: every connection (Graph, the token endpoint, download and upload URLs the service
   * hands out) checked against the agent's allow/deny lists. `ca`: certificates to trust instead
   * of the system's (tests against a self-signed fake; never a way to skip verification).
   */
  constructor(guard: NetworkGuard, ca?: string | Buffer) {
    this.agent = guard.protect(new Agent({ keepAlive: true, maxSockets: 16, maxFreeSockets: 4, ...(ca ? { ca } : {}) }));
  }

  async send(req: HttpRequest, retried = false): Promise<HttpResponse> {
    if (req.signal?.aborted) throw requestError(req.signal.reason, req.ctx, req.signal);
    const url = new URL(req.url);
    if (url.protocol !== 'https:') throw requestError(new Error(`refusing a non-HTTPS URL from the service (${url.protocol})`), req.ctx);
    const headers: Record<string, string> = { ...req.headers };
    const body = req.body;
    const streamed = typeof body === 'object' && !Buffer.isBuffer(body);
    headers['Content-Length'] = String(body === undefined ? 0 : streamed ? (body as BodySource).length : Buffer.byteLength(body as string | Buffer));
    const outgoing = request(url, { method: req.method, headers, agent: this.agent, signal: req.signal });
    outgoing.setTimeout(ANSWER_TIMEOUT_MS, () => outgoing.destroy(Object.assign(new Error('no answer'), { code: 'ETIMEDOUT' })));
    let answered: IncomingMessage | undefined;
    /** The answer's body when it came before the request body was sent (read before the request is cut). */
    let early: Promise<string> | undefined;
    const response = new Promise<IncomingMessage>((resolve, reject) => {
      outgoing.once('response', (res) => {
        outgoing.setTimeout(0);
        answered = res;
        resolve(res);
      });
      outgoing.once('error', reject);
    });
    response.catch(() => undefined);
    try {
      if (streamed) {
        // An early refusal: stop sending at once rather than stream the rest to a server that will not keep it.
        // Its error body is read first: cutting the request cuts the socket, and the answer with it.
        response.then((res) => {
          if ((res.statusCode ?? 0) < 300) return;
          early = readText(res, req).catch(() => '');
          void early.then(() => outgoing.destroy());
        }, () => undefined);
        const failed = await pipeline((body as BodySource).open(), outgoing).then(() => null, (err: unknown) => err);
        if (failed && !(answered && !req.signal?.aborted)) throw failed;
      } else outgoing.end(body);
      const res = await response;
      return {
        status: res.statusCode ?? 0,
        headers: res.headers,
        body: res,
        discard: () => void res.resume(),
        text: () => early ?? readText(res, req),
      };
    } catch (err) {
      outgoing.destroy();
      // A kept-alive connection the server closed just as it was reused: the request never
      // reached it, so it is sent once more on a fresh connection.
      const code = (err as { code?: string }).code;
      if (!retried && outgoing.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE') && !req.signal?.aborted) return this.send(req, true);
      throw requestError(err, req.ctx, req.signal);
    }
  }

  /**
   * `send`, again after 429 and 5xx as the service asks (Retry-After), at most MAX_ATTEMPTS
   * times; the last answer is returned whatever its status (the caller maps it).
   */
  async sendRetrying(req: HttpRequest): Promise<HttpResponse> {
    for (let attempt = 1; ; attempt++) {
      const res = await this.send(req);
      if (!isRetryable(res.status) || attempt >= MAX_ATTEMPTS) return res;
      const waitMs = retryAfterMs(res.headers['retry-after'], attempt);
      if (waitMs > MAX_RETRY_AFTER_MS) return res;
      res.discard();
      try {
        await sleep(waitMs, undefined, { signal: req.signal });
      } catch (err) {
        throw requestError(err, req.ctx, req.signal);
      }
    }
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Throttled (429) or failing on the service's side (5xx other than 501 Not Implemented and 507 full). */
export function isRetryable(status: number): boolean {
  return status === 429 || (status >= 500 && status !== 501 && status !== 505 && status !== 507);
}

/** Milliseconds a Retry-After header asks for (delay-seconds or an HTTP date), else a doubling backoff from 1 s. */
export function retryAfterMs(header: string | string[] | undefined, attempt: number, now = Date.now()): number {
  const value = Array.isArray(header) ? header[0] : header;
  if (value !== undefined && value.trim() !== '') {
    if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
    const date = Date.parse(value);
    if (!Number.isNaN(date)) return Math.max(0, date - now);
  }
  return 1000 * 2 ** (attempt - 1);
}

/** The `error` object of a Graph error body, when the body is one. */
export async function errorBody(res: HttpResponse): Promise<GraphErrorBody | undefined> {
  try {
    const parsed = JSON.parse(await res.text()) as { error?: unknown };
    return typeof parsed.error === 'object' && parsed.error !== null ? (parsed.error as GraphErrorBody) : undefined;
  } catch {
    return undefined;
  }
}

/** The ConnectorError for an answer the caller did not accept, its body read for Graph's error code. */
export async function failure(res: HttpResponse, ctx: GraphErrorContext): Promise<Error> {
  return graphError(res.status, await errorBody(res), ctx);
}

/** `host:port` of a URL, for messages. */
export function endpointOf(url: string): string {
  const u = new URL(url);
  return `${u.hostname.includes(':') ? `[${u.hostname}]` : u.hostname}:${u.port || 443}`;
}

const MAX_TEXT_BYTES = 16 * 1024 * 1024;

async function readText(res: IncomingMessage, req: HttpRequest): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  try {
    for await (const chunk of res) {
      bytes += (chunk as Buffer).length;
      // JSON answers are small (a page of 200 items); anything larger is not one.
      if (bytes > MAX_TEXT_BYTES) throw new Error('the answer is larger than any JSON answer of Microsoft Graph');
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    throw requestError(err, req.ctx, req.signal);
  }
  return Buffer.concat(chunks).toString('utf8');
}

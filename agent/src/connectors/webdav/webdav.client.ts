import { Agent as HttpAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { NetworkGuard } from '../network-guard.js';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { parseXML } from 'webdav';
import { ConnectorError } from '../types.js';
import type { WebdavConfig } from './webdav.config.js';
import { httpError, requestError, type WebdavErrorContext } from './webdav.errors.js';

/** One resource of a PROPFIND answer, its path decoded and relative to the server root. */
export interface DavResource {
  /** Decoded absolute path on the server, without a trailing slash (`/` for the root). */
  serverPath: string;
  collection: boolean;
  size: number;
  modifiedAt?: Date;
  etag?: string;
}

export interface DavRequest {
  method: string;
  /** Absolute server path, decoded; encoded here segment by segment. */
  serverPath: string;
  /** A trailing slash on the URL (collections: some servers redirect without it). */
  collection?: boolean;
  headers?: Record<string, string>;
  /** A string, or a stream sent with chunked encoding and backpressure (never gathered in memory). */
  body?: string | Readable;
  signal?: AbortSignal;
  /** Statuses besides 2xx the caller handles itself. */
  accept?: number[];
  ctx: WebdavErrorContext;
}

/** A response whose status the caller accepted; its body must be consumed or discarded. */
export interface DavResponse {
  status: number;
  body: IncomingMessage;
  /** Drops the body (the socket goes back to the pool once it has drained). */
  discard(): void;
  text(): Promise<string>;
}

const PROPFIND_BODY = '<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:prop>'
  + '<D:resourcetype/><D:getcontentlength/><D:getlastmodified/><D:getetag/></D:prop></D:propfind>';

/** Same-origin redirects followed for requests without a streamed body (a collection's missing slash). */
const MAX_REDIRECTS = 5;
/** Socket inactivity before an answer starts (while a body is sent, the socket is active). */
const ANSWER_TIMEOUT_MS = 120_000;

/**
 * HTTP/1.1 requests to one WebDAV server with Basic auth, through node:http(s) and a keep-alive
 * agent of its own. A streamed body goes through `pipeline`, so it is read only as fast as the
 * socket drains (Node's fetch was measured to pull a 1 GiB body into memory ahead of the socket).
 */
export class DavClient {
  private readonly agent: HttpAgent | HttpsAgent;
  private readonly secure: boolean;

  /** `guard`: every connection of the agent checked against the agent's allow/deny lists. */
  constructor(readonly config: WebdavConfig, guard: NetworkGuard) {
    this.secure = config.origin.startsWith('https:');
    const options = { keepAlive: true, maxSockets: 16, maxFreeSockets: 4 };
    this.agent = guard.protect(this.secure ? new HttpsAgent(options) : new HttpAgent(options));
  }

  url(serverPath: string, collection = false): string {
    const encoded = serverPath.split('/').map((s) => encodeURIComponent(s)).join('/');
    return `${this.config.origin}${encoded}${collection && !encoded.endsWith('/') ? '/' : ''}`;
  }

  /** Sends a request; resolves with the response for 2xx and `accept`ed statuses, else rejects mapped. */
  async request(req: DavRequest): Promise<DavResponse> {
    let url = this.url(req.serverPath, req.collection);
    for (let redirects = 0; ; redirects++) {
      const res = await this.send(url, req);
      const status = res.statusCode ?? 0;
      const location = res.headers.location;
      if ([301, 302, 307, 308].includes(status) && location && typeof req.body !== 'object' && redirects < MAX_REDIRECTS) {
        const next = new URL(location, url);
        res.resume();
        if (next.origin === new URL(this.config.origin).origin) {
          url = next.href;
          continue;
        }
      }
      if ((status >= 200 && status < 300) || req.accept?.includes(status)) {
        return { status, body: res, discard: () => void res.resume(), text: () => readText(res, req) };
      }
      res.resume();
      throw httpError(status, res.statusMessage ?? '', req.ctx);
    }
  }

  private async send(url: string, req: DavRequest, retried = false): Promise<IncomingMessage> {
    if (req.signal?.aborted) throw requestError(req.signal.reason, req.ctx, req.signal);
    const headers: Record<string, string> = { Authorization: this.config.authorization, ...req.headers };
    if (typeof req.body === 'string') headers['Content-Length'] = String(Buffer.byteLength(req.body));
    else if (req.body === undefined) headers['Content-Length'] = '0';
    const request = (this.secure ? httpsRequest : httpRequest)(url, { method: req.method, headers, agent: this.agent, signal: req.signal });
    // Until the answer starts: a server that accepts and then says nothing. Not afterwards, when
    // a slow consumer may legitimately leave a response body unread for long.
    request.setTimeout(ANSWER_TIMEOUT_MS, () => request.destroy(Object.assign(new Error('no answer'), { code: 'ETIMEDOUT' })));
    let answered: IncomingMessage | undefined;
    const response = new Promise<IncomingMessage>((resolve, reject) => {
      request.once('response', (res) => {
        request.setTimeout(0);
        answered = res;
        resolve(res);
      });
      request.once('error', reject);
    });
    response.catch(() => undefined);
    try {
      if (typeof req.body === 'object') {
        // An early refusal (401, 403, 413 before the body is read): stop sending at once rather
        // than stream the rest of the body to a server that will not keep it.
        response.then((res) => (res.statusCode ?? 0) >= 300 && request.destroy(), () => undefined);
        const failed = await pipeline(req.body, request).then(() => null, (err: unknown) => err);
        // An answer that came before the body was sent (and cut it) wins over the broken pipe.
        if (failed && !(answered && !req.signal?.aborted)) throw failed;
        return await response;
      }
      request.end(req.body);
      return await response;
    } catch (err) {
      request.destroy();
      // A kept-alive connection the server closed just as it was reused: the request never
      // reached it, so one without a streamed body is sent once more on a fresh connection.
      const code = (err as { code?: string }).code;
      if (!retried && typeof req.body !== 'object' && request.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE') && !req.signal?.aborted) {
        return this.send(url, req, true);
      }
      throw requestError(err, req.ctx, req.signal);
    }
  }

  /**
   * PROPFIND with `Depth: 0` or `1` (never infinity: one collection at a time). Null when nothing
   * is at `serverPath` (404, or 409 for a missing intermediate collection).
   */
  async propfind(serverPath: string, depth: 0 | 1, ctx: WebdavErrorContext, signal?: AbortSignal): Promise<DavResource[] | null> {
    const res = await this.request({
      method: 'PROPFIND', serverPath, collection: depth === 1, signal, ctx, accept: [404, 409],
      headers: { Depth: String(depth), 'Content-Type': 'application/xml; charset=utf-8' }, body: PROPFIND_BODY,
    });
    if (res.status === 404 || res.status === 409) {
      res.discard();
      return null;
    }
    const text = await res.text();
    try {
      return await parseMultistatus(text, this.config.origin);
    } catch (err) {
      throw new ConnectorError('TRANSIENT', `${ctx.op} ${JSON.stringify(ctx.path)} on ${ctx.endpoint}: the server's PROPFIND answer is not a WebDAV multistatus`, { cause: err });
    }
  }

  /** Closes pooled sockets. */
  close(): void {
    this.agent.destroy();
  }
}

async function readText(res: IncomingMessage, req: DavRequest): Promise<string> {
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of res) chunks.push(chunk as Buffer);
  } catch (err) {
    throw requestError(err, req.ctx, req.signal);
  }
  return Buffer.concat(chunks).toString('utf8');
}

interface PropstatLike {
  prop?: Record<string, unknown>;
  status?: string;
}

async function parseMultistatusAsync(text: string): Promise<Array<{ href?: unknown; propstat?: PropstatLike | PropstatLike[] }>> {
  const parsed = await parseXML(text);
  const responses = parsed?.multistatus?.response as unknown;
  if (!responses) return [];
  return (Array.isArray(responses) ? responses : [responses]) as Array<{ href?: unknown; propstat?: PropstatLike | PropstatLike[] }>;
}

/** The resources of a 207 answer, with hrefs decoded to server paths. */
async function parseMultistatus(text: string, origin: string): Promise<DavResource[]> {
  const out: DavResource[] = [];
  for (const response of await parseMultistatusAsync(text)) {
    if (response.href === undefined) continue;
    const propstats = Array.isArray(response.propstat) ? response.propstat : response.propstat ? [response.propstat] : [];
    const ok = propstats.filter((p) => !p.status || / 2\d\d /.test(`${p.status} `));
    const prop: Record<string, unknown> = Object.assign({}, ...ok.map((p) => p.prop ?? {}));
    const serverPath = hrefPath(String(response.href), origin);
    if (serverPath === null) continue;
    const type = prop.resourcetype;
    const collection = typeof type === 'object' && type !== null && 'collection' in type;
    const size = Number(prop.getcontentlength ?? 0);
    const modified = prop.getlastmodified ? new Date(String(prop.getlastmodified)) : undefined;
    const etag = prop.getetag !== undefined && prop.getetag !== '' ? String(prop.getetag) : undefined;
    out.push({
      serverPath, collection, size: Number.isFinite(size) && !collection ? size : 0,
      ...(modified && !Number.isNaN(modified.getTime()) ? { modifiedAt: modified } : {}),
      ...(etag ? { etag } : {}),
    });
  }
  return out;
}

/** `href` (absolute URL or absolute path, percent-encoded) as a decoded path without trailing slash; null if undecodable. */
function hrefPath(href: string, origin: string): string | null {
  let path: string;
  try {
    path = new URL(href, `${origin}/`).pathname;
  } catch {
    return null;
  }
  const segments: string[] = [];
  for (const s of path.split('/')) {
    if (s === '') continue;
    try {
      const name = decodeURIComponent(s);
      // An encoded '/' inside a name no connector path can name.
      if (name.includes('/')) return null;
      segments.push(name);
    } catch {
      return null;
    }
  }
  return `/${segments.join('/')}`;
}

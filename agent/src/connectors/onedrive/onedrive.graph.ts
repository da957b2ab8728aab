import { ConnectorError } from '../types.js';
import type { OnedriveConfig } from './onedrive.config.js';
import { endpointOf, failure, type HttpRequest, type HttpResponse, type HttpsClient } from './onedrive.http.js';
import type { TokenSource } from './onedrive.token.js';
import type { GraphErrorContext } from './onedrive.errors.js';

/** The driveItem fields the connector reads (Microsoft Graph "driveItem resource type"). */
export interface DriveItem {
  id: string;
  name: string;
  size?: number;
  lastModifiedDateTime?: string;
  /** The file's own times as the client set them (rclone's modification time), not the upload's. */
  fileSystemInfo?: { lastModifiedDateTime?: string };
  eTag?: string;
  /** The folder the item is in, and its drive (a copy names both). */
  parentReference?: { driveId?: string; id?: string };
  folder?: { childCount?: number };
  file?: { mimeType?: string; hashes?: { quickXorHash?: string; sha1Hash?: string; sha256Hash?: string } };
  root?: object;
}

/** A page of a collection: `value`, and `@odata.nextLink` while more pages follow. */
export interface GraphPage<T> {
  value: T[];
  '@odata.nextLink'?: string;
}

export interface GraphRequest extends Omit<HttpRequest, 'url' | 'ctx'> {
  /** A path under the Graph origin (`/v1.0/...`), or an absolute URL the service returned. */
  url: string;
  ctx: Omit<GraphErrorContext, 'endpoint'>;
  /** Statuses besides 2xx the caller handles itself. */
  accept?: number[];
  /**
   * Send the access token (default). False for the pre-authenticated URLs Graph hands out
   * (uploadUrl, downloadUrl): they may be on other hosts, and the documentation says an
   * Authorization header there can fail the request — the token never leaves Graph's origin.
   */
  auth?: boolean;
}

/**
 * Microsoft Graph requests of one connector: the access token on requests to Graph's origin
 * only, one new token after a 401 (it may have been revoked or expired early), throttling and
 * 5xx retried as the service asks (HttpsClient.sendRetrying), other statuses mapped to
 * ConnectorErrors unless the caller accepts them.
 */
export class GraphClient {
  constructor(
    readonly config: OnedriveConfig,
    private readonly http: HttpsClient,
    private readonly tokens: TokenSource,
  ) {}

  async request(req: GraphRequest): Promise<HttpResponse> {
    const url = req.url.startsWith('/') ? `${this.config.graphOrigin}${req.url}` : req.url;
    const auth = req.auth !== false;
    const ctx = { ...req.ctx, endpoint: auth ? this.config.endpoint : endpointOf(url) };
    if (auth && new URL(url).origin !== new URL(this.config.graphOrigin).origin) {
      // An @odata.nextLink elsewhere than Graph: the token is not sent to another host.
      throw new ConnectorError('TRANSIENT', `${ctx.op} ${JSON.stringify(ctx.path)}: Microsoft Graph pointed to another host (${endpointOf(url)}); not following it`);
    }
    for (let attempt = 1; ; attempt++) {
      const token = auth ? await this.tokens.get(req.signal) : undefined;
      const headers = { ...req.headers, ...(token ? { Authorization: `Bearer ${token}` } : {}) };
      const res = await this.http.sendRetrying({ ...req, url, headers, ctx });
      if (res.status === 401 && token && attempt === 1) {
        res.discard();
        this.tokens.invalidate(token);
        continue;
      }
      if ((res.status >= 200 && res.status < 300) || req.accept?.includes(res.status)) return res;
      throw await failure(res, ctx);
    }
  }

  /** `request`, its body parsed as JSON. */
  async json<T>(req: GraphRequest): Promise<T> {
    const res = await this.request(req);
    const text = await res.text();
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new ConnectorError('TRANSIENT', `${req.ctx.op} ${JSON.stringify(req.ctx.path)} on ${this.config.endpoint}: the answer is not JSON (HTTP ${res.status})`, { cause: err });
    }
  }
}

import { createHash, createHmac, type BinaryLike } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { SignatureV4 } from '@smithy/signature-v4';
import { backoffDelayMs } from '@xfer/shared';
import type { S3Target, S3Tuning } from './s3.config.js';

/** Most of an error answer worth reading: S3 error documents are a few hundred bytes. */
const MAX_ERROR_BODY = 64 * 1024;

export interface PutAnswer {
  etag?: string;
  checksumSha256?: string;
}

/** Errors worth sending the same bytes again for: the network, the store's 5xx and throttling, damaged bytes. */
const RETRYABLE = new Set(['BadDigest', 'RequestTimeout', 'SlowDown', 'InternalError', 'ServiceUnavailable', 'TimeoutError']);
const ATTEMPTS = 3;

/**
 * PutObject and UploadPart of a buffered body (a list of chunks, sent as they are: no copy into
 * one buffer), and HeadObject of a file, signed with the SDK's own SigV4 signer and sent with `node:http(s)` on a
 * keep-alive agent, without the SDK's middleware stack. That stack cost 1.2 ms of CPU per request
 * (schemas, endpoint rules, retry and checksum middleware) against 0.5 ms here, and a copy of
 * many small files is made of little else (docs/connectors.md). A request failing on the network,
 * a 5xx, throttling or a damaged body is sent again (3 attempts in all), as the SDK would.
 * Everything else (creating and completing multipart uploads, listing, DELETE) stays on the SDK.
 *
 * A failure is thrown shaped like the SDK's service exceptions (`name` = the S3 error code,
 * `$metadata.httpStatusCode`, `$response.headers`), so `s3Error` maps both alike; network errors
 * keep Node's `code`.
 */
export class DirectS3 {
  private readonly signer: SignatureV4;
  private readonly agent: http.Agent;
  private readonly origin: URL;
  private readonly pathStyle: boolean;

  constructor(target: S3Target, private readonly tuning: Pick<S3Tuning, 'socketTimeoutMs'>) {
    const { clientConfig } = target;
    const region = String(clientConfig.region);
    const credentials = clientConfig.credentials as { accessKeyId: string; secretAccessKey: string };
    this.signer = new SignatureV4({ service: 's3', region, credentials, sha256: Sha256, uriEscapePath: false, applyChecksum: false });
    this.origin = new URL(typeof clientConfig.endpoint === 'string' ? clientConfig.endpoint : `https://s3.${region}.amazonaws.com`);
    // As the SDK does: a bucket name that is no DNS label (dots break TLS names) goes in the path.
    this.pathStyle = clientConfig.forcePathStyle === true || !/^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/.test(target.bucket);
    this.agent = target.guard.protect(this.origin.protocol === 'https:' ? new https.Agent({ keepAlive: true, maxSockets: 64 }) : new http.Agent({ keepAlive: true, maxSockets: 64 }));
  }

  /** PUT `body` to `key` (with `query`, an UploadPart); resolves with what the store answered. */
  async put(bucket: string, key: string, body: readonly Buffer[], headers: Record<string, string>, options: { signal?: AbortSignal; query?: Record<string, string> } = {}): Promise<PutAnswer> {
    const answer = await this.retrying(() => this.send('PUT', bucket, key, body, headers, options), options.signal);
    return { etag: header(answer, 'etag'), checksumSha256: header(answer, 'x-amz-checksum-sha256') };
  }

  /**
   * HEAD of `key`: the object's headers (size, ETag, Last-Modified, `x-amz-meta-*`, the SHA-256
   * with `checksumMode`). A comparison by modification time stats every object its listing cannot
   * date (S3 listings carry no metadata), so this runs once per unchanged file of a resync: the
   * SDK's HeadObject cost 0.55–0.63 ms of CPU each here against 0.13–0.18 ms signed this way
   * (docs/connectors.md). Network errors, 5xx and throttling are retried as for a PUT.
   */
  async head(bucket: string, key: string, options: { signal?: AbortSignal; checksumMode?: boolean } = {}): Promise<http.IncomingHttpHeaders> {
    const headers: Record<string, string> = options.checksumMode ? { 'x-amz-checksum-mode': 'ENABLED' } : {};
    return this.retrying(() => this.send('HEAD', bucket, key, [], headers, options), options.signal);
  }

  private async retrying<T>(fn: () => Promise<T>, signal: AbortSignal | undefined): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        if (attempt >= ATTEMPTS || signal?.aborted || !retryable(err)) throw err;
        await new Promise((resolve) => setTimeout(resolve, backoffDelayMs(attempt, 100, Infinity)));
      }
    }
  }

  private async send(
    method: 'PUT' | 'HEAD', bucket: string, key: string, body: readonly Buffer[], headers: Record<string, string>, options: { signal?: AbortSignal; query?: Record<string, string> },
  ): Promise<http.IncomingHttpHeaders> {
    const encodedKey = key.split('/').map(encodeSegment).join('/');
    const hostname = this.pathStyle ? this.origin.hostname : `${bucket}.${this.origin.hostname}`;
    const host = this.origin.port ? `${hostname}:${this.origin.port}` : hostname;
    const path = this.pathStyle ? `/${encodeSegment(bucket)}/${encodedKey}` : `/${encodedKey}`;
    const query = options.query ?? {};
    const search = Object.keys(query).sort().map((k) => `${encodeSegment(k)}=${encodeSegment(query[k]!)}`).join('&');
    const length = body.reduce((n, chunk) => n + chunk.length, 0);
    const signed = await this.signer.sign({
      method, protocol: this.origin.protocol, hostname, port: this.origin.port ? Number(this.origin.port) : undefined, path, query,
      headers: {
        host, ...(method === 'PUT' ? { 'content-type': 'application/octet-stream', 'content-length': String(length) } : {}),
        // SigV4 would sign the payload by its SHA-256, one more pass over every byte (a third of the
        // client's CPU on large objects); the signed Content-MD5 or x-amz-checksum-* header already
        // has the store check every byte.
        'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...headers,
      },
    });
    return await new Promise<http.IncomingHttpHeaders>((resolve, reject) => {
      const request = (this.origin.protocol === 'https:' ? https : http).request({
        agent: this.agent, method, hostname: this.origin.hostname.replace(/^\[|\]$/g, ''), port: this.origin.port || undefined,
        path: search ? `${path}?${search}` : path, headers: signed.headers, signal: options.signal, servername: this.origin.protocol === 'https:' ? hostname : undefined,
      }, (response) => {
        const status = response.statusCode ?? 0;
        if (status >= 200 && status < 300) {
          response.resume();
          response.once('end', () => resolve(response.headers));
          return;
        }
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          if (size < MAX_ERROR_BODY) chunks.push(chunk);
          size += chunk.length;
        });
        response.once('end', () => reject(serviceError(status, Buffer.concat(chunks).toString('utf8'), response.headers)));
      });
      request.setTimeout(this.tuning.socketTimeoutMs, () => request.destroy(Object.assign(new Error(`no answer within ${this.tuning.socketTimeoutMs} ms`), { name: 'TimeoutError' })));
      request.once('error', reject);
      // One writev for the headers and every chunk.
      request.cork();
      for (const chunk of body) request.write(chunk);
      request.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

function retryable(err: unknown): boolean {
  const e = err as { code?: unknown; name?: string; $metadata?: { httpStatusCode?: number } };
  if (e.name === 'AbortError') return false;
  if (typeof e.code === 'string') return true;
  const status = e.$metadata?.httpStatusCode ?? 0;
  return status >= 500 || status === 429 || RETRYABLE.has(e.name ?? '');
}

/** The SDK's error shape for an S3 error document (or a bare status, e.g. a HEAD-like empty 404). */
function serviceError(status: number, body: string, headers: http.IncomingHttpHeaders): Error {
  const code = /<Code>([^<]*)<\/Code>/.exec(body)?.[1];
  const message = /<Message>([^<]*)<\/Message>/.exec(body)?.[1] ?? (code ?? `HTTP ${status}`);
  return Object.assign(new Error(message), {
    name: code ?? `HTTP${status}`,
    $metadata: { httpStatusCode: status },
    $response: { headers: Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : String(v ?? '')])) },
  });
}

export function header(headers: http.IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return typeof value === 'string' ? value : undefined;
}

/** S3's URI encoding of one path segment: RFC 3986 unreserved characters kept, everything else %XX. */
function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

type SourceData = string | ArrayBuffer | ArrayBufferView;

function bytes(data: SourceData): BinaryLike {
  if (typeof data === 'string') return data;
  return data instanceof ArrayBuffer ? Buffer.from(data) : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

/** The hash constructor SigV4 asks for: SHA-256, or HMAC-SHA256 when given a secret. */
class Sha256 {
  private readonly hash;

  constructor(secret?: SourceData) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }

  update(data: SourceData): void {
    this.hash.update(bytes(data));
  }

  digest(): Promise<Uint8Array> {
    return Promise.resolve(this.hash.digest());
  }
}

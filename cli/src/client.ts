/**
 * The API client the commands use. The typed client in `@xfer/shared` (`XferClient`, `ApiError`,
 * `exitCodeOf`) is being written alongside the CLI; until it lands this module provides the same
 * shape for the endpoints the CLI calls, so switching is a change of this file alone.
 */
import type { ApiKey, Connection, CreateApiKeyRequest, CreateConnectionRequest, CreatedApiKey, Deleted, ListConnectionsQuery, Page, Session, UpdateConnectionRequest } from '@xfer/shared';

/** What went wrong with a request: the server answered (`http`), or it could not be reached in time. */
export type ApiErrorKind = 'http' | 'network' | 'timeout';

/** A failed API call: `message` is the server's `{error}` or a description of the network failure. */
export class ApiError extends Error {
  constructor(readonly status: number, message: string, readonly kind: ApiErrorKind = 'http', options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ApiError';
  }
}

/** Exit codes of the CLI (docs/cli.md), stable for scripts. */
export const ExitCode = { ok: 0, other: 1, usage: 2, auth: 3, notFound: 4, conflict: 5, transient: 6, transferFailed: 7 } as const;

/** The exit code an error maps to. */
export function exitCodeOf(err: unknown): number {
  if (!(err instanceof ApiError)) return ExitCode.other;
  if (err.kind !== 'http') return ExitCode.transient;
  if (err.status === 401 || err.status === 403) return ExitCode.auth;
  if (err.status === 404) return ExitCode.notFound;
  if (err.status === 409) return ExitCode.conflict;
  if (err.status === 429 || err.status === 502 || err.status === 503 || err.status === 504) return ExitCode.transient;
  return ExitCode.other;
}

export interface XferClientOptions {
  /** Base URL including `/api/v1`. */
  baseUrl: string;
  /** API key or session token; absent for public calls (login). */
  token?: string;
  timeoutMs?: number;
  /** Retries of 429/503 and network failures, honouring Retry-After, with exponential backoff. */
  retries?: number;
}

type Query = Record<string, string | number | undefined>;

class Resource<T, C, U, Q extends Query = Query> {
  constructor(protected readonly http: Http, protected readonly path: string) {}
  list(query: Q = {} as Q): Promise<Page<T>> { return this.http.page<T>(this.path, query); }
  /** Every page, following `next_cursor`. */
  async all(query: Q = {} as Q): Promise<T[]> {
    const items: T[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.list({ ...query, cursor } as Q);
      items.push(...page.data);
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    return items;
  }
  get(id: string): Promise<T> { return this.http.data<T>('GET', `${this.path}/${encodeURIComponent(id)}`); }
  create(body: C): Promise<T> { return this.http.data<T>('POST', this.path, body); }
  update(id: string, body: U): Promise<T> { return this.http.data<T>('PUT', `${this.path}/${encodeURIComponent(id)}`, body); }
  delete(id: string): Promise<Deleted> { return this.http.data<Deleted>('DELETE', `${this.path}/${encodeURIComponent(id)}`); }
}

export interface ConnectionTestResult { success: boolean; message: string; latency_ms: number }

class Connections extends Resource<Connection, CreateConnectionRequest, UpdateConnectionRequest, Omit<ListConnectionsQuery, 'type'> & { type?: string } & Query> {
  test(id: string): Promise<ConnectionTestResult> { return this.http.data('POST', `${this.path}/${encodeURIComponent(id)}/test`); }
}

class ApiKeys extends Resource<ApiKey, CreateApiKeyRequest, never> {
  override create(body: CreateApiKeyRequest): Promise<CreatedApiKey> { return this.http.data<CreatedApiKey>('POST', this.path, body); }
}

class Http {
  constructor(private readonly opts: XferClientOptions) {}

  async data<T>(method: string, path: string, body?: unknown): Promise<T> {
    return ((await this.request(method, path, body)) as { data: T }).data;
  }

  page<T>(path: string, query: Query): Promise<Page<T>> {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined) qs.set(k, String(v));
    const suffix = qs.size > 0 ? `?${qs}` : '';
    return this.request('GET', `${path}${suffix}`) as Promise<Page<T>>;
  }

  private async request(method: string, path: string, body?: unknown): Promise<unknown> {
    const retries = this.opts.retries ?? 3;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once(method, path, body);
      } catch (err) {
        const retryable = err instanceof RetryableError || (err instanceof ApiError && err.kind === 'network');
        if (!retryable || attempt >= retries) throw err instanceof RetryableError ? err.error : err;
        const backoffMs = Math.min(30_000, 500 * 2 ** attempt);
        await new Promise((r) => setTimeout(r, err instanceof RetryableError && err.afterMs !== null ? err.afterMs : backoffMs));
      }
    }
  }

  private async once(method: string, path: string, body?: unknown): Promise<unknown> {
    const timeoutMs = this.opts.timeoutMs ?? 30_000;
    const url = `${this.opts.baseUrl.replace(/\/+$/, '')}${path}`;
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: {
          ...(this.opts.token ? { authorization: `Bearer ${this.opts.token}` } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const timedOut = err instanceof Error && err.name === 'TimeoutError';
      const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : '';
      throw timedOut
        ? new ApiError(0, `${method} ${url} got no answer within ${timeoutMs} ms`, 'timeout', { cause: err })
        : new ApiError(0, `cannot reach ${url}${cause}`, 'network', { cause: err });
    }
    const text = await res.text();
    let parsed: unknown;
    try { parsed = text ? JSON.parse(text) : undefined; } catch { parsed = undefined; }
    if (res.ok) return parsed;
    const message = (parsed as { error?: unknown } | undefined)?.error;
    const error = new ApiError(res.status, typeof message === 'string' ? message : `HTTP ${res.status} ${res.statusText}`);
    if (res.status === 429 || res.status === 503) throw new RetryableError(error, retryAfterMs(res.headers.get('retry-after')));
    throw error;
  }
}

class RetryableError extends Error {
  constructor(readonly error: ApiError, readonly afterMs: number | null) { super(error.message); }
}

function retryAfterMs(header: string | null): number | null {
  if (!header) return null;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.min(60_000, Math.max(0, seconds * 1000));
  const at = Date.parse(header);
  return Number.isNaN(at) ? null : Math.min(60_000, Math.max(0, at - Date.now()));
}

/** A typed method per endpoint the CLI calls. */
export class XferClient {
  readonly connections: Connections;
  readonly apiKeys: ApiKeys;
  readonly auth: { login(body: { email: string; password: string; otp?: string }): Promise<Session> };

  constructor(opts: XferClientOptions) {
    const http = new Http(opts);
    this.connections = new Connections(http, '/connections');
    this.apiKeys = new ApiKeys(http, '/api-keys');
    this.auth = { login: (body) => http.data<Session>('POST', '/auth/login', body) };
  }
}

import { Readable } from 'node:stream';
import {
  ApiError, describeNetworkError, isPermanentNetworkError, kindOfStatus,
} from './errors.js';
import { DEFAULT_BACKOFF, isIdempotent, parseRetryAfter, retryDelayMs, sleep, type BackoffOptions } from './retry.js';

/** Told before each wait for another attempt (e.g. to print "rate limited, retrying in 3 s"). */
export interface RetryInfo {
  method: string;
  url: string;
  /** The attempt that failed (1-based). */
  attempt: number;
  delayMs: number;
  error: ApiError;
}

export interface TransportOptions {
  /** Up to and including `/api/v1`, e.g. `https://xfer.example.com/api/v1`. */
  baseUrl: string;
  token?: string;
  timeoutMs: number;
  retries: number;
  backoff: Required<BackoffOptions>;
  fetch: typeof fetch;
  userAgent: string;
  onRetry?: (info: RetryInfo) => void;
}

export type QueryValue = string | number | boolean | null | undefined;

/** One call: everything but method and path is optional. */
export interface CallOptions {
  query?: Readonly<Record<string, QueryValue>>;
  /** Sent as JSON. */
  json?: unknown;
  /** A body that can be read once: never retried, and timed out only when it stalls. */
  stream?: { body: AsyncIterable<Uint8Array>; contentType: string; contentLength?: number };
  headers?: Readonly<Record<string, string>>;
  signal?: AbortSignal;
  /** Per-attempt limit for this call; 0 for none. Defaults to the client's `timeoutMs`. */
  timeoutMs?: number;
  /** False for the public share-link download: no Authorization header. */
  auth?: boolean;
}

/** Every per-call setting a resource method passes through from its caller. */
export type CallSettings = Pick<CallOptions, 'signal' | 'timeoutMs'>;

/** `{data, next_cursor?, warning?}` as the server sent it. */
export interface ApiEnvelope<T> {
  data: T;
  next_cursor?: string | null;
  warning?: string;
}

/** A successful answer whose body is left unread for the caller to stream. */
export interface StreamedResponse {
  status: number;
  headers: Headers;
  /** The body; it fails with an `ApiError` of kind `timeout` when no byte arrives for `timeoutMs`. */
  body: Readable;
}

/** An AbortController that fires after `ms` unless reset or cleared; `ms` 0 never fires. */
class Deadline {
  readonly controller = new AbortController();
  fired = false;
  private cleared = false;
  private timer: NodeJS.Timeout | undefined;
  constructor(readonly ms: number) { this.reset(); }
  reset(): void {
    if (this.ms <= 0 || this.fired || this.cleared) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => { this.fired = true; this.controller.abort(); }, this.ms);
  }
  /**
   * Final: the call is over. An upload's body may still be pulled after its answer came (a server
   * refuses before reading it), and a reset then must not re-arm the timer: it held the CLI's
   * process open for the whole timeout after it had printed the error.
   */
  clear(): void { this.cleared = true; clearTimeout(this.timer); }
}

/**
 * The one request core under every resource method: URL and headers, per-attempt timeout,
 * retries with backoff, and the error answers turned into `ApiError`.
 */
export class Transport {
  readonly baseUrl: string;
  constructor(private readonly opts: TransportOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
  }

  /** A path under the base URL, or an absolute URL as is, with the query's defined values. */
  url(pathOrUrl: string, query?: Readonly<Record<string, QueryValue>>): URL {
    const url = /^https?:\/\//i.test(pathOrUrl) ? new URL(pathOrUrl) : new URL(this.baseUrl + pathOrUrl);
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    return url;
  }

  /** The parsed JSON body of a successful call (an envelope or a bare object). */
  async json<T>(method: string, path: string, options: CallOptions = {}): Promise<T> {
    const { response, deadline, url } = await this.send(method, path, options);
    try {
      return (await response.json()) as T;
    } catch (err) {
      throw this.failure(err, deadline, options.signal, method, url, 1);
    } finally {
      deadline.clear();
    }
  }

  /** `data` of an enveloped answer, with the envelope's other fields. */
  envelope<T>(method: string, path: string, options?: CallOptions): Promise<ApiEnvelope<T>> {
    return this.json<ApiEnvelope<T>>(method, path, options);
  }

  /** A successful answer with its body unread (downloads). */
  async stream(method: string, path: string, options: CallOptions = {}): Promise<StreamedResponse> {
    const { response, deadline, url } = await this.send(method, path, options);
    // From here the limit is on silence, not on the whole download, which may take hours.
    deadline.reset();
    // Locked now, not when the consumer starts reading: undici cancels the body of a Response
    // that is garbage-collected while its stream is unlocked, and the Response is unreachable once
    // this returns. A consumer that started late (the CLI loads its progress view first, 0.4 s of
    // allocation) then read a silently empty body.
    const reader = response.body?.getReader();
    const read = async function* (this: Transport) {
      if (!reader) return;
      /** The body ended or failed by itself; otherwise the consumer stopped reading. */
      let finished = false;
      try {
        for (;;) {
          let next: Awaited<ReturnType<typeof reader.read>>;
          try {
            next = await reader.read();
          } catch (err) {
            finished = true;
            throw this.failure(err, deadline, options.signal, method, url, 1);
          }
          if (next.done) { finished = true; return; }
          deadline.reset();
          yield next.value;
        }
      } finally {
        deadline.clear();
        // The consumer stopped early (or destroyed its stream): let the connection go.
        if (!finished) await reader.cancel().catch(() => {});
      }
    }.call(this);
    return { status: response.status, headers: response.headers, body: Readable.from(read, { objectMode: false }) };
  }

  private async send(method: string, path: string, options: CallOptions) {
    const url = this.url(path, options.query);
    const replayable = !options.stream;
    const idempotent = isIdempotent(method);
    for (let attempt = 1; ; attempt++) {
      const deadline = new Deadline(options.timeoutMs ?? this.opts.timeoutMs);
      const signal = options.signal ? AbortSignal.any([options.signal, deadline.controller.signal]) : deadline.controller.signal;
      let error: ApiError;
      let retryAfterMs: number | undefined;
      try {
        const response = await this.opts.fetch(url, { method, headers: this.headers(options), signal, ...this.body(options, deadline) });
        if (response.ok) return { response, deadline, url };
        error = await this.errorOf(response, method, url, attempt);
        deadline.clear();
        retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
        const retryableStatus = response.status === 429 || response.status === 503 || (idempotent && (response.status === 502 || response.status === 504));
        if (!replayable || !retryableStatus || attempt > this.opts.retries) throw error;
        // Waiting out a long Retry-After would hang a script; the caller sees the figure instead.
        if (retryAfterMs !== undefined && retryAfterMs > this.opts.backoff.maxRetryAfterMs) throw error;
      } catch (err) {
        deadline.clear();
        if (err instanceof ApiError) throw err;
        const failed = this.failure(err, deadline, options.signal, method, url, attempt);
        if (!(failed instanceof ApiError)) throw failed;
        error = failed;
        if (!replayable || !idempotent || isPermanentNetworkError(err) || attempt > this.opts.retries) throw error;
      }
      const delayMs = retryDelayMs(attempt, retryAfterMs, this.opts.backoff);
      this.opts.onRetry?.({ method, url: url.toString(), attempt, delayMs, error });
      await sleep(delayMs, options.signal);
    }
  }

  private headers(options: CallOptions): Record<string, string> {
    const headers: Record<string, string> = { accept: 'application/json', 'user-agent': this.opts.userAgent, ...options.headers };
    if (options.auth !== false && this.opts.token) headers.authorization = `Bearer ${this.opts.token}`;
    if (options.json !== undefined) headers['content-type'] = 'application/json';
    if (options.stream) {
      headers['content-type'] = options.stream.contentType;
      if (options.stream.contentLength !== undefined) headers['content-length'] = String(options.stream.contentLength);
    }
    return headers;
  }

  private body(options: CallOptions, deadline: Deadline): { body?: RequestInit['body']; duplex?: 'half' } {
    if (options.json !== undefined) return { body: JSON.stringify(options.json) };
    if (!options.stream) return {};
    const iterator = options.stream.body[Symbol.asyncIterator]();
    // Each chunk taken restarts the timer: an upload is limited by stalls, not by its length.
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        const next = await iterator.next();
        deadline.reset();
        if (next.done) controller.close();
        else controller.enqueue(next.value);
      },
      async cancel(reason) { await iterator.return?.(reason); },
    }, { highWaterMark: 0 });
    return { body, duplex: 'half' };
  }

  /** The `ApiError` of an error answer; the body is `{error}`, or anything a proxy sent. */
  private async errorOf(response: Response, method: string, url: URL, attempt: number): Promise<ApiError> {
    const text = await response.text().catch(() => '');
    let message = `HTTP ${response.status} ${response.statusText}`.trim();
    try {
      const parsed = JSON.parse(text) as { error?: unknown };
      if (typeof parsed?.error === 'string' && parsed.error) message = parsed.error;
    } catch { /* not JSON: keep the status line */ }
    const retryAfterMs = parseRetryAfter(response.headers.get('retry-after'));
    return new ApiError(message, {
      kind: kindOfStatus(response.status), status: response.status, method, url: redact(url), attempts: attempt,
      retryAfterSeconds: retryAfterMs === undefined ? undefined : Math.ceil(retryAfterMs / 1000),
      requestId: response.headers.get('x-request-id') ?? undefined,
    });
  }

  /** A failure with no answer: the caller's abort as is, our timeout, or the network. */
  private failure(err: unknown, deadline: Deadline, signal: AbortSignal | undefined, method: string, url: URL, attempt: number): unknown {
    if (err instanceof ApiError) return err;
    if (signal?.aborted) return signal.reason;
    if (deadline.fired) {
      return new ApiError(`Request to ${url.origin} timed out after ${deadline.ms / 1000} s`, { kind: 'timeout', method, url: redact(url), attempts: attempt, cause: err });
    }
    return new ApiError(describeNetworkError(err, url), { kind: 'network', method, url: redact(url), attempts: attempt, cause: err });
  }
}

/** Share tokens live in the path: an error that may be logged never carries one. */
function redact(url: URL): string {
  return url.toString().replace(/\/files\/shared\/[^/?#]+/, '/files/shared/[redacted]');
}

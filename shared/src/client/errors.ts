/**
 * The client's errors and the CLI's stable exit codes (issue 6: 0 ok, 1 other, 2 usage,
 * 3 unauthenticated/forbidden, 4 not found, 5 conflict, 6 rate-limited or transient failure after
 * retries, 7 transfer failed).
 */
import type { ExecuteTransferResult } from '../schemas/transfers.js';

/** What went wrong, in the terms a caller branches on. */
export type ApiErrorKind =
  | 'invalid' | 'unauthenticated' | 'forbidden' | 'not_found' | 'conflict' | 'gone' | 'too_large'
  | 'rate_limited' | 'unavailable' | 'network' | 'timeout' | 'server';

/** Exit codes of the `xfer` CLI; stable, documented, scripts rely on them. */
export const ExitCode = {
  ok: 0, other: 1, usage: 2, auth: 3, notFound: 4, conflict: 5, transient: 6, transferFailed: 7,
} as const;

const KIND_EXIT: Readonly<Record<ApiErrorKind, number>> = {
  // The server refused the input itself (fields, upload content or size): fix the call, never retry.
  invalid: ExitCode.usage,
  too_large: ExitCode.usage,
  unauthenticated: ExitCode.auth,
  forbidden: ExitCode.auth,
  not_found: ExitCode.notFound,
  // A share link that expired, was revoked or used up is as absent as an unknown id.
  gone: ExitCode.notFound,
  conflict: ExitCode.conflict,
  rate_limited: ExitCode.transient,
  unavailable: ExitCode.transient,
  network: ExitCode.transient,
  timeout: ExitCode.transient,
  // A 500 is a server bug: nothing the caller can fix or wait out.
  server: ExitCode.other,
};

/** The kind of an HTTP error status. */
export function kindOfStatus(status: number): ApiErrorKind {
  switch (status) {
    case 401: return 'unauthenticated';
    case 403: return 'forbidden';
    case 404: return 'not_found';
    case 409: return 'conflict';
    case 410: return 'gone';
    case 413: return 'too_large';
    case 429: return 'rate_limited';
    case 502: case 503: case 504: return 'unavailable';
    default: return status >= 500 ? 'server' : 'invalid';
  }
}

export interface ApiErrorInit {
  kind: ApiErrorKind;
  /** HTTP status; 0 when no answer arrived (network, timeout). */
  status?: number;
  method: string;
  url: string;
  retryAfterSeconds?: number;
  requestId?: string;
  /** Attempts made, retries included. */
  attempts?: number;
  cause?: unknown;
}

/**
 * A call that did not succeed: an error answer (`status` and the server's `error` message as
 * `message`) or no answer at all (`kind` network or timeout, `status` 0).
 */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  readonly kind: ApiErrorKind;
  readonly status: number;
  readonly method: string;
  readonly url: string;
  /** From `Retry-After` on 429 and 503, in seconds. */
  readonly retryAfterSeconds: number | undefined;
  /** `X-Request-Id` of the answer: quote it when reporting a server fault. */
  readonly requestId: string | undefined;
  readonly attempts: number;

  constructor(message: string, init: ApiErrorInit) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.kind = init.kind;
    this.status = init.status ?? 0;
    this.method = init.method;
    this.url = init.url;
    this.retryAfterSeconds = init.retryAfterSeconds;
    this.requestId = init.requestId;
    this.attempts = init.attempts ?? 1;
  }

  /** The CLI exit code for this error. */
  get exitCode(): number {
    return KIND_EXIT[this.kind];
  }
}

/** A blocking execute answered `success: false`: the job failed or was cancelled (exit code 7). */
export class TransferFailedError extends Error {
  override readonly name = 'TransferFailedError';
  constructor(readonly transferId: string, readonly result: ExecuteTransferResult) {
    super(`Transfer ${transferId} ${result.status ?? 'failed'}${result.error ? `: ${result.error}` : ''}`);
  }
}

/** The exit code for any error a command ends with (1 for anything that is not the client's). */
export function exitCodeOf(err: unknown): number {
  if (err instanceof ApiError) return err.exitCode;
  if (err instanceof TransferFailedError) return ExitCode.transferFailed;
  return ExitCode.other;
}

const TLS_CODES = /^(CERT_|ERR_TLS_|ERR_SSL_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|HOSTNAME_MISMATCH)/;

/** The first error code found on `err` or its causes (undici nests the socket error in `cause`). */
export function errorCode(err: unknown): string | undefined {
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const nested = (e as { errors?: unknown[] }).errors;
    if (Array.isArray(nested) && nested.length > 0) { e = nested[0]; continue; }
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/** True for failures that no retry can cure: a name that does not exist, a certificate refused. */
export function isPermanentNetworkError(err: unknown): boolean {
  const code = errorCode(err) ?? '';
  return code === 'ENOTFOUND' || TLS_CODES.test(code);
}

/** A sentence for a failure before any answer, naming the server as the user typed it. */
export function describeNetworkError(err: unknown, url: URL): string {
  const code = errorCode(err);
  const origin = url.origin;
  switch (code) {
    case 'ECONNREFUSED': return `Connection refused to ${origin}: is the xfer server running there?`;
    case 'ENOTFOUND': return `DNS name not found: ${url.hostname}`;
    case 'EAI_AGAIN': return `DNS lookup of ${url.hostname} failed temporarily`;
    case 'ECONNRESET': case 'UND_ERR_SOCKET': case 'EPIPE': return `Connection to ${origin} was closed unexpectedly`;
    case 'ETIMEDOUT': case 'UND_ERR_CONNECT_TIMEOUT': return `Connecting to ${origin} timed out`;
    case 'EHOSTUNREACH': case 'ENETUNREACH': return `No route to ${origin}`;
    default: break;
  }
  const detail = err instanceof Error ? ((err.cause instanceof Error ? err.cause.message : '') || err.message) : String(err);
  if (code && TLS_CODES.test(code)) return `TLS failure talking to ${origin}: ${detail} (${code})`;
  return `Network error talking to ${origin}: ${detail}${code ? ` (${code})` : ''}`;
}

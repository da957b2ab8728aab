import { ConnectorError, type ConnectorErrorCode } from '../types.js';
import { networkMessages } from '../network-errors.js';

/** What went wrong where: the operation and the connector path, for messages. */
export interface WebdavErrorContext {
  op: string;
  path: string;
  endpoint: string;
}

/** Network and TLS failures (node:http's error `code`) by what to tell the user. */
const NETWORK: Record<string, string> = {
  ...networkMessages('a WebDAV server', 'set options.secure to false'),
  ETIMEDOUT: 'timed out (no answer within 2 minutes)',
};
const TLS_PLAIN = NETWORK.EPROTO!;

/** The code for an HTTP status the server answered with (RFC 4918 and RFC 9110 meanings). */
export function statusCode(status: number): ConnectorErrorCode {
  if (status === 401) return 'AUTH';
  if (status === 403) return 'PERMISSION';
  // 409 from PUT, MKCOL, MOVE: an intermediate collection is missing.
  if (status === 404 || status === 409 || status === 410) return 'NOT_FOUND';
  // 423 Locked: a lock held by another client (or the server still finishing an upload); it ends.
  if (status === 408 || status === 423 || status === 429 || status >= 500 && status !== 501 && status !== 505 && status !== 507) return 'TRANSIENT';
  if (status === 405 || status === 501) return 'UNSUPPORTED';
  // 412 precondition, 413 too large, 415, 507 insufficient storage, ...
  return 'CONFLICT';
}

/** A ConnectorError for a response with an unexpected status. */
export function httpError(status: number, statusText: string, ctx: WebdavErrorContext): ConnectorError {
  const code = statusCode(status);
  const what = `${ctx.op} ${JSON.stringify(ctx.path)} on ${ctx.endpoint}`;
  const why = code === 'AUTH' ? 'authentication failed (wrong username or password)'
    : status === 403 ? 'permission denied'
    : code === 'NOT_FOUND' ? 'not found'
    : status === 507 ? 'the server has no space left'
    : `the server answered ${status} ${statusText}`.trim();
  return new ConnectorError(code, `${what}: ${why} (HTTP ${status})`, { cause: new Error(`HTTP ${status} ${statusText}`) });
}

/** A ConnectorError for a request that got no answer (network, TLS, abort). */
export function requestError(err: unknown, ctx: WebdavErrorContext, signal?: AbortSignal): ConnectorError {
  if (err instanceof ConnectorError) return err;
  if (signal?.aborted || (err as Error)?.name === 'AbortError') {
    return new ConnectorError('TRANSIENT', `${ctx.op} ${JSON.stringify(ctx.path)}: aborted`, { cause: err });
  }
  const code = networkCode(err);
  const why = (code && NETWORK[code]) ?? (/wrong version number|packet length too long/i.test(String(causeOf(err)?.message)) ? TLS_PLAIN : undefined)
    ?? (causeOf(err)?.message || (err as Error)?.message || String(err));
  return new ConnectorError('TRANSIENT', `${ctx.op} ${JSON.stringify(ctx.path)} on ${ctx.endpoint}: ${why}`, { cause: err });
}

/** A wrapped error's cause, if any. */
function causeOf(err: unknown): (Error & { code?: string; errors?: unknown[] }) | undefined {
  // Duck-typed: errors from another realm (undici's, in a test VM) fail `instanceof Error`.
  const cause = (err as { cause?: unknown })?.cause;
  return typeof cause === 'object' && cause !== null && 'message' in cause ? (cause as Error & { code?: string }) : undefined;
}

/** The system code, looking through a cause and Happy Eyeballs' AggregateError. */
function networkCode(err: unknown): string | undefined {
  const cause = causeOf(err) ?? (err as Error & { code?: string });
  if (cause?.code) return cause.code;
  const first = (cause as { errors?: Array<{ code?: string }> })?.errors?.[0];
  return first?.code;
}

import { ConnectorError, type ConnectorErrorCode } from '../types.js';
import { networkMessages } from '../network-errors.js';

/** What went wrong where: the operation and the connector path, for messages. */
export interface GraphErrorContext {
  op: string;
  path: string;
  /** `host:port` the request went to. */
  endpoint: string;
}

/** Network and TLS failures (node:https's error `code`) by what to tell the user. */
const NETWORK: Record<string, string> = {
  ...networkMessages('an HTTPS server', 'onedrive connections always use HTTPS'),
  ETIMEDOUT: 'timed out (no answer within 2 minutes)',
};

/** Graph's error body, `{"error": {"code", "message"}}` (Microsoft Graph "Error responses"). */
export interface GraphErrorBody {
  code?: string;
  message?: string;
}

/** The code for a Graph status (and its error code, which says more than the status where it exists). */
export function graphCode(status: number, code?: string): ConnectorErrorCode {
  if (status === 401) return 'AUTH';
  if (status === 403) return 'PERMISSION';
  if (status === 404 || status === 410) return 'NOT_FOUND';
  // 423 resourceLocked: someone has the file open (co-authoring); it ends.
  if (status === 408 || status === 423 || status === 429 || (status >= 500 && status !== 501 && status !== 507)) return 'TRANSIENT';
  if (status === 501 || code === 'notSupported') return 'UNSUPPORTED';
  // 409 nameAlreadyExists, 412 eTag changed, 413, 416, 507 quotaLimitReached, 400 invalidRequest.
  return 'CONFLICT';
}

/** A ConnectorError for a Graph answer with an unexpected status. */
export function graphError(status: number, body: GraphErrorBody | undefined, ctx: GraphErrorContext): ConnectorError {
  const code = graphCode(status, body?.code);
  const what = `${ctx.op} ${JSON.stringify(ctx.path)} on ${ctx.endpoint}`;
  const why = code === 'AUTH' ? 'Microsoft Graph refused the access token'
    : code === 'PERMISSION' ? 'access denied'
    : code === 'NOT_FOUND' ? 'not found'
    : status === 507 ? 'the drive is full'
    : status === 429 ? 'throttled by Microsoft Graph'
    : `Microsoft Graph answered ${status}`;
  const detail = [body?.code, body?.message].filter(Boolean).join(': ');
  return new ConnectorError(code, `${what}: ${why} (HTTP ${status}${detail ? `, ${detail}` : ''})`, { cause: new Error(`HTTP ${status} ${body?.code ?? ''}`.trim()) });
}

/** A ConnectorError for a request that got no answer (network, TLS, abort). */
export function requestError(err: unknown, ctx: GraphErrorContext, signal?: AbortSignal): ConnectorError {
  if (err instanceof ConnectorError) return err;
  if (signal?.aborted || (err as Error)?.name === 'AbortError') {
    return new ConnectorError('TRANSIENT', `${ctx.op} ${JSON.stringify(ctx.path)}: aborted`, { cause: err });
  }
  const code = (err as { code?: string })?.code ?? (err as { errors?: Array<{ code?: string }> })?.errors?.[0]?.code;
  const why = (code && NETWORK[code]) ?? (/wrong version number|packet length too long/i.test(String((err as Error)?.message)) ? NETWORK.EPROTO : undefined)
    ?? ((err as Error)?.message || String(err));
  return new ConnectorError('TRANSIENT', `${ctx.op} ${JSON.stringify(ctx.path)} on ${ctx.endpoint}: ${why}`, { cause: err });
}

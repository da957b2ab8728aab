import { NetworkRefusal } from '../network-guard.js';
import { ConnectorError, type ConnectorErrorCode } from '../types.js';

/**
 * Azure Storage error codes (`x-ms-error-code`) every service shares, by what the engine should
 * do about them (Microsoft's "Common REST API error codes"). Services add their own.
 */
const COMMON_CODES: Record<string, ConnectorErrorCode> = {
  // An unknown account on an emulator or fake (on Azure, an unknown account is a DNS failure).
  ResourceNotFound: 'NOT_FOUND',
  AuthenticationFailed: 'AUTH',
  // Azurite's answer to a signature made with the wrong key; Azure's to a request its network rules refuse.
  AuthorizationFailure: 'AUTH',
  InvalidAuthenticationInfo: 'AUTH',
  NoAuthenticationInformation: 'AUTH',
  AccountIsDisabled: 'PERMISSION',
  AuthorizationPermissionMismatch: 'PERMISSION',
  AuthorizationResourceTypeMismatch: 'PERMISSION',
  AuthorizationServiceMismatch: 'PERMISSION',
  AuthorizationSourceIPMismatch: 'PERMISSION',
  AuthorizationProtocolMismatch: 'PERMISSION',
  InsufficientAccountPermissions: 'PERMISSION',
  ResourceAlreadyExists: 'CONFLICT',
  ResourceTypeMismatch: 'CONFLICT',
  RequestBodyTooLarge: 'CONFLICT',
  OutOfRangeInput: 'CONFLICT',
  InvalidResourceName: 'CONFLICT',
  // Bytes damaged on the way: the next attempt sends them again.
  Md5Mismatch: 'TRANSIENT',
  InvalidMd5: 'TRANSIENT',
  ServerBusy: 'TRANSIENT',
  InternalError: 'TRANSIENT',
  OperationTimedOut: 'TRANSIENT',
};

/** What an Azure SDK error carries (RestError, or a network error the pipeline passed on). */
export interface RestErrorLike {
  name?: string;
  code?: string;
  message?: string;
  statusCode?: number;
  details?: { errorCode?: string };
}

/** What the error is about, for the message: the operation, the path as the user knows it, the endpoint. */
export interface AzureErrorContext {
  op: string;
  path: string;
  where: string;
}

/** What one service (blob, file share) knows over the common codes. */
export interface AzureErrorSpec {
  /** The service's own error codes. */
  codes: Record<string, ConnectorErrorCode>;
  /** networkMessages(...) naming the service. */
  network: Record<string, string>;
  /** A code and message of its own for some errors (what is missing, named), else undefined. */
  known?(name: string, e: RestErrorLike): { code: ConnectorErrorCode; message: string } | undefined;
}

/**
 * An Azure SDK (or network) error as a ConnectorError whose message says what to fix: a refused
 * key is AUTH, a refused operation PERMISSION, a network failure TRANSIENT naming the endpoint.
 */
export function azureError(err: unknown, ctx: AzureErrorContext, spec: AzureErrorSpec): ConnectorError {
  if (err instanceof ConnectorError) return err;
  // The SDK re-throws a socket's error as a RestError with its code and message only.
  const refused = NetworkRefusal.within(err);
  if (refused) return refused;
  const e = (err ?? {}) as RestErrorLike;
  const what = `${ctx.op} ${ctx.path === '' ? '/' : ctx.path}`;
  if (e.name === 'AbortError') return new ConnectorError('TRANSIENT', `${what}: aborted`, { cause: err });
  const network = networkCode(e, spec.network);
  if (network) return new ConnectorError('TRANSIENT', `${what}: ${ctx.where}: ${spec.network[network]}`, { cause: err });
  const name = errorName(e);
  const status = e.statusCode;
  const known = spec.known?.(name, e);
  if (known) return new ConnectorError(known.code, `${what}: ${known.message}`, { cause: err });
  let code: ConnectorErrorCode | undefined = spec.codes[name] ?? COMMON_CODES[name];
  if (!code && status !== undefined && status > 0) {
    // A HEAD answer has no body; a 403 there is almost always a refused signature.
    if (status === 401 || status === 403) code = name === '' ? 'AUTH' : 'PERMISSION';
    else if (status === 404) code = 'NOT_FOUND';
    else if (status === 409 || status === 412) code = 'CONFLICT';
    else if (status === 501) code = 'UNSUPPORTED';
    else if (status === 408 || status === 429 || status >= 500) code = 'TRANSIENT';
    else if (status >= 300) code = 'CONFLICT';
  }
  code ??= 'TRANSIENT';
  return new ConnectorError(code, `${what}: ${describe(name, code, e, ctx)}`, { cause: err });
}

/** The service's error code (`x-ms-error-code`), or '' when the answer had none. */
export function errorName(e: RestErrorLike): string {
  return e.details?.errorCode ?? (e.code && /^[A-Z][A-Za-z]+$/.test(e.code) ? e.code : '');
}

/** The Node network error code of `e`, from its code or (wrapped by the pipeline) its message. */
function networkCode(e: RestErrorLike, network: Record<string, string>): string | undefined {
  if (e.code && network[e.code]) return e.code;
  return Object.keys(network).find((code) => e.message?.includes(` ${code} `) || e.message?.includes(` ${code}:`) || e.message?.endsWith(` ${code}`) || e.message?.startsWith(`${code} `));
}

function describe(name: string, code: ConnectorErrorCode, e: RestErrorLike, ctx: AzureErrorContext): string {
  if (code === 'AUTH') return `the account name or key is not accepted by ${ctx.where} (${name || `HTTP ${e.statusCode}`})`;
  if (code === 'NOT_FOUND') return 'does not exist';
  if (code === 'PERMISSION') return `access denied (${name || `HTTP ${e.statusCode ?? 403}`})`;
  // The first line only: Azure appends RequestId and Time lines.
  const message = (e.message ?? '').split('\n')[0] || `HTTP ${e.statusCode ?? '?'}`;
  return name ? `${name}: ${message}` : message;
}

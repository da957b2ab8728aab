import { ConnectorError, type ConnectorErrorCode } from '../types.js';
import { networkMessages } from '../network-errors.js';

/** Azure Storage error codes (`x-ms-error-code`) by what the engine should do about them. */
const CODES: Record<string, ConnectorErrorCode> = {
  BlobNotFound: 'NOT_FOUND',
  ContainerNotFound: 'NOT_FOUND',
  // An unknown account on an emulator (on Azure, an unknown account is a DNS failure).
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
  BlobArchived: 'PERMISSION',
  BlobImmutableDueToPolicy: 'PERMISSION',
  LeaseIdMissing: 'CONFLICT',
  LeaseIdMismatchWithBlobOperation: 'CONFLICT',
  BlobAlreadyExists: 'CONFLICT',
  ContainerBeingDeleted: 'CONFLICT',
  InvalidBlobOrBlock: 'CONFLICT',
  InvalidBlockList: 'CONFLICT',
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

const NETWORK = networkMessages('a Blob service', 'use a connection string with DefaultEndpointsProtocol=http');

interface RestErrorLike {
  name?: string;
  code?: string;
  message?: string;
  statusCode?: number;
  details?: { errorCode?: string };
}

/** What the error is about: the operation and path for messages, the container and endpoint to name. */
export interface BlobErrorContext {
  op: string;
  /** Connector path, as the user knows it. */
  path: string;
  container: string;
  where: string;
}

/**
 * An Azure SDK (or network) error as a ConnectorError whose message says what to fix: a missing
 * container or account is named, a refused key is AUTH, a refused operation PERMISSION.
 */
export function blobError(err: unknown, ctx: BlobErrorContext): ConnectorError {
  if (err instanceof ConnectorError) return err;
  const e = (err ?? {}) as RestErrorLike;
  const what = `${ctx.op} ${ctx.path === '' ? '/' : ctx.path}`;
  if (e.name === 'AbortError') return new ConnectorError('TRANSIENT', `${what}: aborted`, { cause: err });
  const network = networkCode(e);
  if (network) return new ConnectorError('TRANSIENT', `${what}: ${ctx.where}: ${NETWORK[network]}`, { cause: err });
  const name = e.details?.errorCode ?? (e.code && /^[A-Z][A-Za-z]+$/.test(e.code) ? e.code : '');
  const status = e.statusCode;
  if (name === 'ContainerNotFound') return new ConnectorError('NOT_FOUND', `${what}: container ${ctx.container} does not exist at ${ctx.where}`, { cause: err });
  if (name === 'ResourceNotFound') return new ConnectorError('NOT_FOUND', `${what}: the account or container ${ctx.container} does not exist at ${ctx.where}`, { cause: err });
  // Azurite answers a Content-MD5 that does not match the body with a generic 400.
  if (status === 400 && /md5/i.test(e.message ?? '')) return new ConnectorError('TRANSIENT', `${what}: the service refused the bytes sent (Content-MD5 mismatch)`, { cause: err });
  let code: ConnectorErrorCode | undefined = CODES[name];
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

/** The Node network error code of `e`, from its code or (wrapped by the pipeline) its message. */
function networkCode(e: RestErrorLike): string | undefined {
  if (e.code && NETWORK[e.code]) return e.code;
  return Object.keys(NETWORK).find((code) => e.message?.includes(` ${code} `) || e.message?.includes(` ${code}:`) || e.message?.endsWith(` ${code}`) || e.message?.startsWith(`${code} `));
}

function describe(name: string, code: ConnectorErrorCode, e: RestErrorLike, ctx: BlobErrorContext): string {
  if (code === 'AUTH') return `the account name or key is not accepted by ${ctx.where} (${name || `HTTP ${e.statusCode}`})`;
  if (code === 'NOT_FOUND') return 'does not exist';
  if (code === 'PERMISSION') return `access denied (${name || `HTTP ${e.statusCode ?? 403}`})`;
  // The first line only: Azure appends RequestId and Time lines.
  const message = (e.message ?? '').split('\n')[0] || `HTTP ${e.statusCode ?? '?'}`;
  return name ? `${name}: ${message}` : message;
}

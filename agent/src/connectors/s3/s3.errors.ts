import { ConnectorError, type ConnectorErrorCode } from '../types.js';
import { networkMessages } from '../network-errors.js';

/** S3 error codes (the SDK's `err.name`) by what the engine should do about them. */
const CODES: Record<string, ConnectorErrorCode> = {
  NoSuchKey: 'NOT_FOUND',
  NotFound: 'NOT_FOUND',
  NoSuchUpload: 'NOT_FOUND',
  NoSuchBucket: 'NOT_FOUND',
  InvalidAccessKeyId: 'AUTH',
  SignatureDoesNotMatch: 'AUTH',
  InvalidToken: 'AUTH',
  ExpiredToken: 'AUTH',
  TokenRefreshRequired: 'AUTH',
  // versitygw answers an unknown access key with this (404) instead of InvalidAccessKeyId.
  XAdminUserNotFound: 'AUTH',
  AccessDenied: 'PERMISSION',
  Forbidden: 'PERMISSION',
  AllAccessDisabled: 'PERMISSION',
  AccountProblem: 'PERMISSION',
  InvalidObjectState: 'PERMISSION',
  // Wrong region or endpoint for the bucket: configuration, not a retry.
  PermanentRedirect: 'CONFLICT',
  AuthorizationHeaderMalformed: 'CONFLICT',
  IllegalLocationConstraintException: 'CONFLICT',
  InvalidBucketName: 'CONFLICT',
  KeyTooLongError: 'CONFLICT',
  EntityTooLarge: 'CONFLICT',
  EntityTooSmall: 'CONFLICT',
  InvalidPart: 'CONFLICT',
  InvalidPartOrder: 'CONFLICT',
  // versitygw (S3 over a POSIX tree): a key whose "parent" is an object, a non-empty directory.
  ObjectParentIsFile: 'CONFLICT',
  ErrDirectoryNotEmpty: 'CONFLICT',
  ExistingObjectIsDirectory: 'CONFLICT',
  NotImplemented: 'UNSUPPORTED',
  // Bytes damaged on the way: the next attempt sends them again.
  BadDigest: 'TRANSIENT',
  InvalidDigest: 'TRANSIENT',
  XAmzContentSHA256Mismatch: 'TRANSIENT',
  RequestTimeout: 'TRANSIENT',
  RequestTimeTooSkewed: 'TRANSIENT',
  SlowDown: 'TRANSIENT',
  Throttling: 'TRANSIENT',
  ThrottlingException: 'TRANSIENT',
  TooManyRequests: 'TRANSIENT',
  ServiceUnavailable: 'TRANSIENT',
  InternalError: 'TRANSIENT',
  TimeoutError: 'TRANSIENT',
};

const NETWORK: Record<string, string> = {
  ...networkMessages('an S3 server', 'set options.secure to false'),
  ERR_TLS_CERT_ALTNAME_INVALID: 'the server certificate does not name this host (try force_path_style for bucket names with dots)',
};

interface SdkError {
  name?: string;
  code?: string;
  message?: string;
  Code?: string;
  $metadata?: { httpStatusCode?: number };
  $response?: { headers?: Record<string, string> };
}

/** What the error is about: the operation and path for messages, and the bucket and endpoint to name. */
export interface S3ErrorContext {
  op: string;
  /** Connector path, as the user knows it. */
  path: string;
  bucket: string;
  where: string;
}

/**
 * An AWS SDK (or network) error as a ConnectorError whose message says what to fix: a missing
 * bucket is named, wrong keys are AUTH, a wrong region names the bucket's region.
 */
export function s3Error(err: unknown, ctx: S3ErrorContext): ConnectorError {
  if (err instanceof ConnectorError) return err;
  const e = (err ?? {}) as SdkError;
  const what = `${ctx.op} ${ctx.path === '' ? '/' : ctx.path}`;
  if (e.name === 'AbortError') return new ConnectorError('TRANSIENT', `${what}: aborted`, { cause: err });
  const network = networkCode(e);
  if (network) return new ConnectorError('TRANSIENT', `${what}: ${ctx.where}: ${NETWORK[network]}`, { cause: err });
  const name = e.Code ?? e.name ?? '';
  const status = e.$metadata?.httpStatusCode;
  if (name === 'NoSuchBucket') return new ConnectorError('NOT_FOUND', `${what}: bucket ${ctx.bucket} does not exist at ${ctx.where}`, { cause: err });
  let code: ConnectorErrorCode | undefined = CODES[name];
  if (!code && status !== undefined) {
    if (status === 401) code = 'AUTH';
    else if (status === 403) code = 'PERMISSION';
    else if (status === 404) code = 'NOT_FOUND';
    else if (status === 501) code = 'UNSUPPORTED';
    else if (status === 429 || status >= 500) code = 'TRANSIENT';
    else if (status >= 300) code = 'CONFLICT';
  }
  code ??= 'TRANSIENT';
  return new ConnectorError(code, `${what}: ${describe(name, code, e, ctx)}`, { cause: err });
}

/**
 * The Node network error code of `e`. The SDK's retry layer re-wraps what is not an Error of its
 * own realm as "AWS SDK error wrapper for Error: connect ECONNREFUSED ...", keeping only the
 * message, so the code is looked for there too.
 */
function networkCode(e: SdkError): string | undefined {
  if (e.code && NETWORK[e.code]) return e.code;
  return Object.keys(NETWORK).find((code) => e.message?.includes(` ${code} `) || e.message?.includes(` ${code}:`) || e.message?.endsWith(` ${code}`));
}

function describe(name: string, code: ConnectorErrorCode, e: SdkError, ctx: S3ErrorContext): string {
  if (code === 'AUTH') return `the access key id or secret access key is not accepted by ${ctx.where} (${name})`;
  if (name === 'PermanentRedirect' || name === 'AuthorizationHeaderMalformed') {
    const region = e.$response?.headers?.['x-amz-bucket-region'];
    return `bucket ${ctx.bucket} is not served at ${ctx.where}${region ? ` (it is in region ${region}: set credentials.region)` : ` (wrong region or endpoint: ${e.message ?? name})`}`;
  }
  if (code === 'NOT_FOUND') return 'does not exist';
  if (code === 'PERMISSION') return `access denied (${name || 'HTTP 403'})`;
  const message = e.message && e.message !== 'UnknownError' ? e.message : `HTTP ${e.$metadata?.httpStatusCode ?? '?'}`;
  return name ? `${name}: ${message}` : message;
}

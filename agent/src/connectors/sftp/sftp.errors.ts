import { ConnectorError, type ConnectorErrorCode } from '../types.js';
import { networkMessages } from '../network-errors.js';

/** SFTP status codes (draft-ietf-secsh-filexfer-02 §7) as ssh2 puts them on `err.code`. */
export const SFTP_STATUS = { EOF: 1, NO_SUCH_FILE: 2, PERMISSION_DENIED: 3, FAILURE: 4, BAD_MESSAGE: 5, NO_CONNECTION: 6, CONNECTION_LOST: 7, OP_UNSUPPORTED: 8 } as const;

const STATUS: Record<number, [ConnectorErrorCode, string]> = {
  [SFTP_STATUS.NO_SUCH_FILE]: ['NOT_FOUND', 'does not exist'],
  [SFTP_STATUS.PERMISSION_DENIED]: ['PERMISSION', 'permission denied'],
  // OpenSSH answers FAILURE for every errno without a portable status: EEXIST, EISDIR, ENOTEMPTY,
  // ENOSPC, EDQUOT... None clears by retrying within seconds; most mean "something is in the way".
  [SFTP_STATUS.FAILURE]: ['CONFLICT', 'the server refused (it exists, is in the way, or the disk is full)'],
  // ENAMETOOLONG, EINVAL.
  [SFTP_STATUS.BAD_MESSAGE]: ['CONFLICT', 'the server rejected the name (too long or invalid)'],
  [SFTP_STATUS.NO_CONNECTION]: ['TRANSIENT', 'no connection'],
  [SFTP_STATUS.CONNECTION_LOST]: ['TRANSIENT', 'connection lost'],
  [SFTP_STATUS.OP_UNSUPPORTED]: ['UNSUPPORTED', 'operation not supported by the server'],
};

const NETWORK = networkMessages('an SSH server');

/** The SFTP status of an ssh2 SFTP error, or undefined for other errors. */
export function sftpStatus(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/**
 * An error of an SFTP request on `path` (a connector path, shown as the user knows it) as a
 * ConnectorError. Channel and connection failures are TRANSIENT; an abort is TRANSIENT too (the
 * engine checks its own signal before retrying, so an abort is never retried).
 */
export function sftpError(err: unknown, path: string, op: string): ConnectorError {
  if (err instanceof ConnectorError) return err;
  const shown = path === '' ? '/' : path;
  const e = err as (Error & { code?: unknown; level?: string }) | null;
  if (e?.name === 'AbortError') return new ConnectorError('TRANSIENT', `${op} ${shown}: aborted`, { cause: err });
  const status = sftpStatus(err);
  if (status !== undefined && STATUS[status]) {
    const [code, words] = STATUS[status];
    return new ConnectorError(code, `${op} ${shown}: ${words}`, { cause: err });
  }
  if (typeof e?.code === 'string' && NETWORK[e.code]) return new ConnectorError('TRANSIENT', `${op} ${shown}: ${NETWORK[e.code]}`, { cause: err });
  // ssh2: 'No response from server' when the connection closes under pending requests, 'Not connected', channel closed.
  return new ConnectorError('TRANSIENT', `${op} ${shown}: ${e?.message ?? String(err)}`, { cause: err });
}

/**
 * An error of connecting to `where` (user@host:port) as a ConnectorError with a message that says
 * what to fix: the host name, the port, the credentials or the host key.
 */
export function connectError(err: unknown, where: string): ConnectorError {
  if (err instanceof ConnectorError) return err;
  const e = err as (Error & { code?: unknown; level?: string }) | null;
  if (e?.name === 'AbortError') return new ConnectorError('TRANSIENT', `connecting to ${where}: aborted`, { cause: err });
  if (e?.level === 'client-authentication') {
    return new ConnectorError('AUTH', `authentication failed for ${where}: wrong username, password or private key`, { cause: err });
  }
  if (typeof e?.code === 'string' && NETWORK[e.code]) return new ConnectorError('TRANSIENT', `connecting to ${where}: ${NETWORK[e.code]}`, { cause: err });
  if (e?.level === 'client-timeout') return new ConnectorError('TRANSIENT', `connecting to ${where}: the SSH handshake timed out`, { cause: err });
  if (e?.level === 'handshake' || e?.level === 'protocol') {
    // No common key exchange, cipher or host key algorithm: retrying will not help.
    return new ConnectorError('UNSUPPORTED', `connecting to ${where}: SSH handshake failed: ${e.message}`, { cause: err });
  }
  return new ConnectorError('TRANSIENT', `connecting to ${where}: ${e?.message ?? String(err)}`, { cause: err });
}

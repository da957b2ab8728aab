import { ConnectorError, type ConnectorErrorCode } from '../types.js';
import { networkMessages } from '../network-errors.js';
import { SmbEncryptionRequired } from './smb.client.js';
import { SmbConnectionError } from './smb.connection.js';
import { Command, SmbStatusError, Status, statusName } from './smb.protocol.js';

const NETWORK: Record<string, string> = {
  ...networkMessages('an SMB server'),
  EPROTO: 'the server does not speak SMB2 or later (is it an SMB server, with SMB2 enabled?)',
  EBADSIG: 'a response signature did not verify (the answer was altered, or the server is not who it says)',
  ENCRYPTED: 'the server encrypts its answers (smb encrypt = required), which this connector does not support',
};

const S = Status;
const NO_ENCRYPTION = 'SMB3 encryption (smb encrypt = required), which this connector does not support yet';
/** What each NTSTATUS means for the engine, and in words. */
const STATUS: Record<number, [ConnectorErrorCode, string]> = {
  [S.OBJECT_NAME_NOT_FOUND]: ['NOT_FOUND', 'does not exist'],
  [S.OBJECT_PATH_NOT_FOUND]: ['NOT_FOUND', 'does not exist (a parent directory is missing)'],
  [S.NO_SUCH_FILE]: ['NOT_FOUND', 'does not exist'],
  [S.NOT_A_DIRECTORY]: ['CONFLICT', 'a file is in the way where a directory was expected'],
  [S.FILE_IS_A_DIRECTORY]: ['CONFLICT', 'is a directory'],
  [S.OBJECT_NAME_COLLISION]: ['CONFLICT', 'something of that name is in the way'],
  [S.DIRECTORY_NOT_EMPTY]: ['CONFLICT', 'the directory is not empty'],
  [S.NOT_SAME_DEVICE]: ['CONFLICT', 'cannot be moved across devices on the server'],
  [S.DISK_FULL]: ['CONFLICT', 'the share is full'],
  [S.QUOTA_EXCEEDED]: ['CONFLICT', "the user's quota on the share is exhausted"],
  [S.OBJECT_NAME_INVALID]: ['CONFLICT', 'the server refuses this name'],
  [S.OBJECT_PATH_SYNTAX_BAD]: ['CONFLICT', 'the server refuses this name'],
  [S.ACCESS_DENIED]: ['PERMISSION', 'permission denied'],
  [S.MEDIA_WRITE_PROTECTED]: ['PERMISSION', 'the share is read only'],
  [S.SHARING_VIOLATION]: ['TRANSIENT', 'another client has it open without sharing (try again later)'],
  [S.DELETE_PENDING]: ['TRANSIENT', 'it is being deleted'],
  [S.NETWORK_NAME_DELETED]: ['TRANSIENT', 'the share was disconnected'],
  [S.USER_SESSION_DELETED]: ['TRANSIENT', 'the server ended the session'],
  [S.NETWORK_SESSION_EXPIRED]: ['TRANSIENT', 'the session expired'],
  [S.INSUFFICIENT_RESOURCES]: ['TRANSIENT', 'the server is out of resources'],
  [S.REQUEST_NOT_ACCEPTED]: ['TRANSIENT', 'the server accepts no more connections'],
  [S.FILE_CLOSED]: ['TRANSIENT', 'the file was closed under the request'],
  [S.CANCELLED]: ['TRANSIENT', 'cancelled by the server'],
  [S.NOT_SUPPORTED]: ['UNSUPPORTED', 'not supported by the server'],
  [S.LOGON_FAILURE]: ['AUTH', 'wrong username or password'],
  [S.WRONG_PASSWORD]: ['AUTH', 'wrong username or password'],
  [S.ACCOUNT_DISABLED]: ['AUTH', 'the account is disabled'],
  [S.ACCOUNT_LOCKED_OUT]: ['AUTH', 'the account is locked out'],
  [S.ACCOUNT_RESTRICTION]: ['AUTH', 'the account may not log in (restriction)'],
  [S.INVALID_LOGON_HOURS]: ['AUTH', 'the account may not log in at this time'],
  [S.PASSWORD_EXPIRED]: ['AUTH', 'the password has expired'],
  [S.PASSWORD_MUST_CHANGE]: ['AUTH', 'the password must be changed first'],
};

/** An error of an operation `op` on `path` (a connector path) as a ConnectorError. */
export function smbError(err: unknown, path: string, op: string): ConnectorError {
  if (err instanceof ConnectorError) return err;
  const shown = `${op} ${path === '' ? '/' : path}`;
  if (err instanceof SmbStatusError) {
    const [code, words] = STATUS[err.status] ?? ['CONFLICT', 'the server refused'];
    return new ConnectorError(code, `${shown}: ${words} (${statusName(err.status)})`, { cause: err });
  }
  return new ConnectorError(...transport(err, shown));
}

/**
 * An error of connecting, logging in to `where` (user@host:port) and connecting the share, with
 * a message that says what to fix: host, port, credentials, share, or the server's settings.
 */
export function connectError(err: unknown, where: string, share: string): ConnectorError {
  if (err instanceof ConnectorError) return err;
  if (err instanceof SmbStatusError) {
    const name = statusName(err.status);
    if (err.command === Command.TREE_CONNECT) {
      if (err.status === S.BAD_NETWORK_NAME) return new ConnectorError('NOT_FOUND', `connected to ${where}, but the share ${share} does not exist on the host (${name})`, { cause: err });
      if (err.status === S.ACCESS_DENIED) return new ConnectorError('PERMISSION', `connected to ${where}, but the server refused the share ${share} (${name}): the user may not use it, or it requires ${NO_ENCRYPTION}`, { cause: err });
    }
    if (err.command === Command.SESSION_SETUP && err.status === S.ACCESS_DENIED) {
      // Samba answers so after a correct password when the server requires encryption.
      return new ConnectorError('PERMISSION', `login refused for ${where} (${name}): the server may require ${NO_ENCRYPTION}, or the account may not log in`, { cause: err });
    }
    if (err.command === Command.SESSION_SETUP) {
      const [code, words] = STATUS[err.status] ?? ['AUTH', 'the server refused the login'];
      return new ConnectorError(code === 'AUTH' ? 'AUTH' : code, `login failed for ${where}: ${words} (${name})`, { cause: err });
    }
    if (err.command === Command.NEGOTIATE) return new ConnectorError('UNSUPPORTED', `connecting to ${where}: the server offers none of SMB 2.0.2 to 3.1.1 (${name})`, { cause: err });
    return smbError(err, '', `connecting to ${where}:`);
  }
  if (err instanceof SmbEncryptionRequired) {
    return new ConnectorError('UNSUPPORTED', `connecting to ${where}: ${err.message}: ${NO_ENCRYPTION}`, { cause: err });
  }
  const [code, message] = transport(err, `connecting to ${where}`);
  return new ConnectorError(code, message.replace(`connecting to ${where}: connection closed by the server`, `connecting to ${where}: the server closed the connection (is it an SMB2 server?)`), { cause: err });
}

function transport(err: unknown, shown: string): [ConnectorErrorCode, string, { cause: unknown }] {
  const e = err as (Error & { code?: unknown }) | null;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  if (e?.name === 'AbortError') return ['TRANSIENT', `${shown}: aborted`, { cause: err }];
  if (code === 'EBADSIG') return ['AUTH', `${shown}: ${NETWORK.EBADSIG}`, { cause: err }];
  if (code === 'EPROTO' || code === 'ENCRYPTED') return ['UNSUPPORTED', `${shown}: ${NETWORK[code]}`, { cause: err }];
  if (code && NETWORK[code]) return ['TRANSIENT', `${shown}: ${NETWORK[code]}`, { cause: err }];
  if (err instanceof SmbConnectionError) return ['TRANSIENT', `${shown}: ${err.message}`, { cause: err }];
  return ['TRANSIENT', `${shown}: ${e?.message ?? String(err)}`, { cause: err }];
}

import { ConnectorError, type ConnectorErrorCode } from '../types.js';
import { NfsStatusError } from './nfs3.protocol.js';

/** nfsstat3 (RFC 1813 2.6): its name, the connector code and words for the user. */
const STATUS: Record<number, [string, ConnectorErrorCode, string]> = {
  1: ['NFS3ERR_PERM', 'PERMISSION', 'operation not permitted'],
  2: ['NFS3ERR_NOENT', 'NOT_FOUND', 'does not exist'],
  5: ['NFS3ERR_IO', 'TRANSIENT', 'I/O error on the server'],
  6: ['NFS3ERR_NXIO', 'NOT_FOUND', 'no such device'],
  13: ['NFS3ERR_ACCES', 'PERMISSION', 'permission denied'],
  17: ['NFS3ERR_EXIST', 'CONFLICT', 'already exists'],
  18: ['NFS3ERR_XDEV', 'UNSUPPORTED', 'cannot rename across file systems'],
  19: ['NFS3ERR_NODEV', 'NOT_FOUND', 'no such device'],
  20: ['NFS3ERR_NOTDIR', 'CONFLICT', 'a parent is not a directory'],
  21: ['NFS3ERR_ISDIR', 'CONFLICT', 'is a directory'],
  22: ['NFS3ERR_INVAL', 'CONFLICT', 'invalid argument'],
  27: ['NFS3ERR_FBIG', 'CONFLICT', 'file too large'],
  // A full disk or quota will not clear by retrying within seconds: the file fails, the job says why.
  28: ['NFS3ERR_NOSPC', 'CONFLICT', 'no space left on the server'],
  30: ['NFS3ERR_ROFS', 'PERMISSION', 'read-only file system (export)'],
  31: ['NFS3ERR_MLINK', 'CONFLICT', 'too many links'],
  63: ['NFS3ERR_NAMETOOLONG', 'CONFLICT', 'name too long'],
  66: ['NFS3ERR_NOTEMPTY', 'CONFLICT', 'directory is not empty'],
  69: ['NFS3ERR_DQUOT', 'CONFLICT', 'disk quota exceeded'],
  // A handle the server no longer knows (the file was replaced, the export moved): looked up again and retried once.
  70: ['NFS3ERR_STALE', 'TRANSIENT', 'stale file handle'],
  71: ['NFS3ERR_REMOTE', 'UNSUPPORTED', 'too many levels of remote in path'],
  10001: ['NFS3ERR_BADHANDLE', 'TRANSIENT', 'the server did not recognize the file handle'],
  10002: ['NFS3ERR_NOT_SYNC', 'TRANSIENT', 'attribute update out of sync'],
  10003: ['NFS3ERR_BAD_COOKIE', 'TRANSIENT', 'the directory changed while it was listed'],
  10004: ['NFS3ERR_NOTSUPP', 'UNSUPPORTED', 'not supported by the server'],
  10005: ['NFS3ERR_TOOSMALL', 'TRANSIENT', 'buffer too small'],
  10006: ['NFS3ERR_SERVERFAULT', 'TRANSIENT', 'the server failed'],
  10007: ['NFS3ERR_BADTYPE', 'UNSUPPORTED', 'the server does not support that type of object'],
  // The server is busy fetching the data (e.g. from tape): try again later.
  10008: ['NFS3ERR_JUKEBOX', 'TRANSIENT', 'the server is busy (try again later)'],
};

/** The nfsstat3 of an error, or undefined for any other error. */
export function nfsStatus(err: unknown): number | undefined {
  return err instanceof NfsStatusError ? err.status : undefined;
}

/**
 * An error of `op` on `path` (a connector path) as a ConnectorError: nfsstat3 by the table
 * above, with the AUTH_SYS identity named where permission was refused (the usual fix is
 * credentials.uid/gid); ConnectorErrors (network, RPC, aborts) pass through, prefixed with the op.
 */
export function nfsError(err: unknown, op: string, path: string, identity: string): ConnectorError {
  const shown = `${op} ${path === '' ? '/' : path}`;
  if (err instanceof ConnectorError) {
    if (err.message.startsWith(shown)) return err;
    return new ConnectorError(err.code, `${shown}: ${err.message}`, { cause: err.cause ?? err });
  }
  if (err instanceof NfsStatusError) {
    const [name, code, words] = STATUS[err.status] ?? [`nfsstat3 ${err.status}`, 'TRANSIENT', 'the server failed'];
    const who = code === 'PERMISSION' ? ` as ${identity}` : '';
    return new ConnectorError(code, `${shown}: ${words}${who} (${err.proc}: ${name})`, { cause: err });
  }
  return new ConnectorError('TRANSIENT', `${shown}: ${(err as Error | null)?.message ?? String(err)}`, { cause: err });
}

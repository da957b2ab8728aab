import { ConnectorError, type ConnectorErrorCode } from '../types.js';

const CODES: Record<string, ConnectorErrorCode> = {
  ENOENT: 'NOT_FOUND',
  EACCES: 'PERMISSION',
  EPERM: 'PERMISSION',
  EROFS: 'PERMISSION',
  ELOOP: 'PERMISSION',
  EEXIST: 'CONFLICT',
  ENOTEMPTY: 'CONFLICT',
  EISDIR: 'CONFLICT',
  ENOTDIR: 'CONFLICT',
  ENAMETOOLONG: 'CONFLICT',
  // A full disk or quota will not clear by retrying within seconds: the file fails, the job says why.
  ENOSPC: 'CONFLICT',
  EDQUOT: 'CONFLICT',
  EFBIG: 'CONFLICT',
  // Resource pressure and flaky mounts (NFS) clear up: worth a retry.
  EMFILE: 'TRANSIENT',
  ENFILE: 'TRANSIENT',
  EAGAIN: 'TRANSIENT',
  EBUSY: 'TRANSIENT',
  EINTR: 'TRANSIENT',
  EIO: 'TRANSIENT',
  ETIMEDOUT: 'TRANSIENT',
  ESTALE: 'TRANSIENT',
};

const WORDS: Record<string, string> = {
  ENOENT: 'does not exist',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EROFS: 'read-only file system',
  ELOOP: 'is a symbolic link',
  EEXIST: 'already exists',
  ENOTEMPTY: 'directory is not empty',
  EISDIR: 'is a directory',
  ENOTDIR: 'a parent is not a directory',
  ENAMETOOLONG: 'name too long',
  ENOSPC: 'no space left on device',
  EDQUOT: 'disk quota exceeded',
};

/**
 * A node:fs error as a ConnectorError naming the connector path (never the host path, which
 * says more about the agent's host than a user needs). Aborts become TRANSIENT: the engine
 * checks its own signal before deciding to retry, so an abort is never retried.
 */
export function fsError(err: unknown, path: string): ConnectorError {
  if (err instanceof ConnectorError) return err;
  const e = err as NodeJS.ErrnoException;
  const shown = path === '' ? '/' : path;
  if (e?.name === 'AbortError') return new ConnectorError('TRANSIENT', `${shown}: aborted`, { cause: err });
  const code = (e?.code && CODES[e.code]) || 'TRANSIENT';
  const words = (e?.code && WORDS[e.code]) || e?.code || (e?.message ?? String(err));
  return new ConnectorError(code, `${shown}: ${words}`, { cause: err });
}

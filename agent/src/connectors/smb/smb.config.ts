import type { ConnectionSettings } from '@xfer/shared';
import { relativePath } from '../paths.js';
import { ConnectorError } from '../types.js';
import type { SmbTarget } from './smb.client.js';

/** Tuning of the smb connector. */
export interface SmbTuning {
  /** A request without its final answer for this long fails TRANSIENT and drops the connection. */
  timeoutMs: number;
  /** READ requests in flight per read stream (each up to the negotiated size, at most 1 MiB). */
  readDepth: number;
  /** WRITE requests in flight per write. */
  writeDepth: number;
  /** Dialects to offer (tests pin SMB 2.1 to exercise HMAC-SHA256 signing); default all supported. */
  dialects?: number[];
}

export const DEFAULT_SMB_TUNING: SmbTuning = { timeoutMs: 60_000, readDepth: 4, writeDepth: 4 };

/** Where a connection points: the share, the directory inside it, and the login. */
export interface SmbEndpoint extends Omit<SmbTarget, 'timeoutMs'> {
  /** Directory inside the share, backslash-separated, '' for the share's root. */
  baseDir: string;
  /** The connection's path as the user wrote it (`/share/dir`), for messages. */
  basePath: string;
  /** `user@host:port`, for messages. */
  where: string;
}

/**
 * Reads a connection's settings. `path` is `/<share>/<dir...>`: the first segment names the
 * share, the rest a directory inside it. `credentials.domain` is optional; `DOMAIN\user` as the
 * username works too.
 */
export function smbEndpoint(settings: ConnectionSettings): SmbEndpoint {
  const { host, port } = settings;
  if (!host) throw new ConnectorError('AUTH', 'smb connection has no host');
  let username = stringField(settings.credentials, 'username');
  const password = stringField(settings.credentials, 'password');
  let domain = stringField(settings.credentials, 'domain') ?? '';
  if (!username || password === undefined) throw new ConnectorError('AUTH', 'credentials.username and credentials.password are required for smb connections');
  const slash = username.indexOf('\\');
  if (slash > 0 && domain === '') {
    domain = username.slice(0, slash);
    username = username.slice(slash + 1);
  }
  const segments = relativePath(settings.path || '/').split('/').filter(Boolean);
  const share = segments.shift();
  if (!share) throw new ConnectorError('NOT_FOUND', 'smb connections need the share in the path: /<share> or /<share>/<directory>');
  const basePath = `/${[share, ...segments].join('/')}`;
  return { host, port, username, password, domain, share, baseDir: segments.join('\\'), basePath, where: `${username}@${host}:${port}` };
}

function stringField(record: Readonly<Record<string, unknown>>, key: string): string | undefined {
  const value = record[key];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

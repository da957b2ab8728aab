import type { ConnectionSettings } from '@xfer/shared';
import { ConnectorError } from '../types.js';

/**
 * The AUTH_SYS identity when the connection gives none: nobody/nogroup (65534), the identity
 * NFS servers squash root to anyway. Least privilege: the agent acts as root (0) or as a file
 * owner only when the connection says so (credentials.uid/gid).
 */
export const DEFAULT_UID = 65534;
export const DEFAULT_GID = 65534;

/** Tuning of the userspace client. */
export interface NfsTuning {
  /** A call without a reply this long fails TRANSIENT and the connection is dropped. */
  timeoutMs: number;
  /** READ requests in flight per read stream. */
  readDepth: number;
  /** WRITE requests in flight per write. */
  writeDepth: number;
  /** Upper bound of one READ or WRITE, below the server's rtmax/wtmax from FSINFO. */
  maxIoBytes: number;
}

export const DEFAULT_NFS_TUNING: NfsTuning = {
  timeoutMs: 60_000,
  readDepth: 8,
  writeDepth: 8,
  maxIoBytes: 1024 * 1024,
};

/** What the userspace client needs: the server, the MOUNT port if known, the identity. */
export interface NfsEndpoint {
  host: string;
  port: number;
  /** options.mount_port; null: asked of rpcbind on port 111. */
  mountPort: number | null;
  uid: number;
  gid: number;
  /** The base path: an export, or a directory below one. */
  path: string;
  /** `uid N gid M`, for messages. */
  identity: string;
}

/** Reads a connection's settings for the userspace mode; malformed fields fail here, before any connection. */
export function nfsEndpoint(settings: ConnectionSettings): NfsEndpoint {
  if (!settings.host) throw new ConnectorError('AUTH', 'nfs connection has no host (or set options.mount_path to use an export mounted on the agent host)');
  const uid = unixId(settings.credentials.uid, 'uid') ?? DEFAULT_UID;
  const gid = unixId(settings.credentials.gid, 'gid') ?? DEFAULT_GID;
  return {
    host: settings.host,
    port: settings.port || 2049,
    mountPort: mountPort(settings.options.mount_port),
    uid,
    gid,
    path: settings.path || '/',
    identity: `uid ${uid} gid ${gid}`,
  };
}

/** options.mount_path: where the export is mounted on the agent host (mounted mode), or null. */
export function mountPathOf(settings: ConnectionSettings): string | null {
  const value = settings.options.mount_path;
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string' || !value.startsWith('/')) throw new ConnectorError('PERMISSION', 'options.mount_path must be an absolute path on the agent host');
  return value;
}

function mountPort(value: unknown): number | null {
  if (value === undefined || value === null || value === '') return null;
  const port = typeof value === 'number' ? value : /^\d{1,5}$/.test(String(value)) ? Number(value) : NaN;
  if (!Number.isInteger(port) || port < 1 || port > 65_535) throw new ConnectorError('UNSUPPORTED', `options.mount_port must be a TCP port number, not ${JSON.stringify(value)}`);
  return port;
}

function unixId(value: unknown, name: string): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const id = typeof value === 'number' ? value : /^\d+$/.test(String(value)) ? Number(value) : NaN;
  if (!Number.isInteger(id) || id < 0 || id > 0xffff_ffff) throw new ConnectorError('AUTH', `credentials.${name} must be an integer from 0 to 4294967295`);
  return id;
}

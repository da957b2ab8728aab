import type { ConnectionSettings } from '@xfer/shared';
import { ConnectorError } from '../types.js';

/** Tuning of the ftp connector. */
export interface FtpTuning {
  /** Control connections per connector: FTP runs one command at a time per connection. */
  connections: number;
  /** basic-ftp's timeout: an idle control socket, a connection attempt, a stalled transfer. */
  timeoutMs: number;
}

export const DEFAULT_FTP_TUNING: FtpTuning = {
  connections: 4,
  timeoutMs: 30_000,
};

export type FtpSecurity = 'none' | 'explicit' | 'implicit';

/** What the pool needs to log in. */
export interface FtpEndpoint {
  host: string;
  port: number;
  user: string;
  password: string;
  security: FtpSecurity;
  /** The 32 bytes of a pinned certificate fingerprint (`options.tls_cert_sha256`), or null. */
  pin: Buffer | null;
  /** `user@host:port`, for messages. */
  where: string;
}

/** Reads a connection's settings; missing or malformed fields fail here, before any connection. */
export function ftpEndpoint(settings: ConnectionSettings): FtpEndpoint {
  const { host, port } = settings;
  const user = stringField(settings.credentials, 'username');
  const password = stringField(settings.credentials, 'password');
  if (!host) throw new ConnectorError('AUTH', 'ftp connection has no host');
  if (!user || password === undefined) throw new ConnectorError('AUTH', 'credentials.username and credentials.password are required for ftp connections');
  const secure = settings.options.secure ?? 'explicit';
  if (secure !== 'none' && secure !== 'explicit' && secure !== 'implicit') {
    throw new ConnectorError('UNSUPPORTED', `options.secure must be none, explicit or implicit, not ${JSON.stringify(secure)}`);
  }
  const pin = pinnedCert(settings.options.tls_cert_sha256);
  if (pin && secure === 'none') throw new ConnectorError('UNSUPPORTED', 'options.tls_cert_sha256 needs TLS: set options.secure to explicit or implicit');
  return { host, port, user, password, security: secure, pin, where: `${user}@${host}:${port}` };
}

/** The 32 bytes of `AB:CD:...` or 64 hex digits, or null when unset. */
export function pinnedCert(value: unknown): Buffer | null {
  if (value === undefined || value === null || value === '') return null;
  const hex = typeof value === 'string' ? value.replace(/:/g, '') : '';
  if (!/^[0-9A-Fa-f]{64}$/.test(hex)) {
    throw new ConnectorError('AUTH', 'options.tls_cert_sha256 must be a SHA-256 certificate fingerprint (AB:CD:... as openssl x509 -fingerprint -sha256 prints it)');
  }
  return Buffer.from(hex, 'hex');
}

function stringField(record: Readonly<Record<string, unknown>>, key: string): string | undefined {
  const value = record[key];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

import { createHash, timingSafeEqual } from 'node:crypto';
// ssh2 is CommonJS whose `utils` Node cannot see as a named export: take it from the default export.
import ssh2, { type ConnectConfig } from 'ssh2';
import type { ConnectionSettings } from '@xfer/shared';
import { ConnectorError } from '../types.js';
import { sameAuthority } from '../authority.js';

/** Tuning of the sftp connector; the defaults were measured against OpenSSH over loopback (docs/connectors.md). */
export interface SftpTuning {
  /** SSH connections per connector, opened as operations find every channel busy (sftp.session.ts). */
  connections: number;
  /** SFTP channels (server-side sftp processes) per SSH connection, used in parallel. */
  channels: number;
  /** Bytes per SFTP READ/WRITE request (OpenSSH accepts up to 255 KiB). */
  chunkBytes: number;
  /** Requests in flight per open file, reading or writing, on a short path. */
  depth: number;
  /**
   * Reads of a file keep up to this many bytes in flight on a long path (sftp.window.ts): the
   * path's round trip times `readRate`, never fewer than `depth` requests.
   */
  maxReadInFlight: number;
  /** Bytes per second one file's reads aim to carry: with the round trip, the bytes they keep in flight. */
  readRate: number;
  readyTimeoutMs: number;
  keepaliveIntervalMs: number;
  /** Unanswered keepalives before the connection counts as dead. */
  keepaliveCountMax: number;
  /** Bytes per `copy-data` request of a server-side copy (sftp.copy.ts). */
  copyDataBytes: number;
}

export const DEFAULT_SFTP_TUNING: SftpTuning = {
  // 4 × 4 channels: the engine's 16 files at once each on a channel of its own.
  connections: 4,
  channels: 4,
  // 2 MiB in flight per file, ssh2's channel window: enough to keep reading while the consumer
  // pauses (an upload part being cut). Deeper pipelines once stalled at some depths; the cause
  // was Nagle's algorithm on the requests (the session now sets TCP_NODELAY), not the window.
  chunkBytes: 128 * 1024,
  depth: 16,
  // A 50 ms round trip needs 8 MiB in flight for 160 MB/s; ssh2's fixed 2 MiB channel window held
  // one file's reads to 20 MB/s there (bench/transfer-matrix.mjs --wan; docs/connectors.md "sftp").
  maxReadInFlight: 8 * 1024 * 1024,
  readRate: 160_000_000,
  readyTimeoutMs: 20_000,
  keepaliveIntervalMs: 15_000,
  keepaliveCountMax: 3,
  // One request copies this much on the server (a few tenths of a second of disk), so a large file
  // is many requests: none runs for minutes, and a cancel is seen between them.
  copyDataBytes: 64 * 1024 * 1024,
};

/** What the session needs to connect: ssh2's config, and what it learns about the host key. */
export interface SftpEndpoint {
  /** `user@host:port`, for messages. */
  where: string;
  /** A fresh ssh2 config whose host verifier reports into `hostKey`. */
  connectConfig(hostKey: HostKeySeen): ConnectConfig;
  /** True when `options.host_key_sha256` pins the server's key. */
  pinned: boolean;
  /**
   * SHA-256 of host, port, username, password, private key, passphrase and pinned host key: two
   * endpoints with equal accounts are the same server reached with the same authority (compared
   * in constant time by `sameAccount`; a server-side copy needs it).
   */
  account: Buffer;
}

/** Filled by the host verifier during a handshake. */
export interface HostKeySeen {
  /** `SHA256:...` of the key the server presented. */
  fingerprint?: string;
  /** The presented key did not match the pinned one. */
  mismatch?: boolean;
}

/**
 * Reads a connection's settings into an endpoint. Credentials problems that need no server (an
 * unparsable private key, a wrong passphrase) fail here with AUTH, before any connection.
 */
export function sftpEndpoint(settings: ConnectionSettings, tuning: SftpTuning): SftpEndpoint {
  const { host, port } = settings;
  const username = stringField(settings.credentials, 'username');
  if (!host) throw new ConnectorError('AUTH', 'sftp connection has no host');
  if (!username) throw new ConnectorError('AUTH', 'credentials.username is required for sftp connections');
  const password = stringField(settings.credentials, 'password');
  const privateKey = stringField(settings.credentials, 'private_key');
  const passphrase = stringField(settings.credentials, 'passphrase');
  if (!password && !privateKey) throw new ConnectorError('AUTH', 'credentials.password or credentials.private_key is required for sftp connections');
  if (privateKey) {
    const parsed = ssh2.utils.parseKey(privateKey, passphrase);
    if (parsed instanceof Error) {
      const why = /passphrase|decrypt|bad decrypt/i.test(parsed.message) ? 'wrong or missing credentials.passphrase' : parsed.message;
      throw new ConnectorError('AUTH', `credentials.private_key cannot be used: ${why}`, { cause: parsed });
    }
  }
  const pin = pinnedDigest(settings.options.host_key_sha256);
  const where = `${username}@${host}:${port}`;
  return {
    where,
    pinned: pin !== null,
    account: createHash('sha256').update(JSON.stringify(['sftp', host, port, username, password ?? null, privateKey ?? null, passphrase ?? null, pin?.toString('hex') ?? null])).digest(),
    connectConfig: (seen) => ({
      host,
      port,
      username,
      password,
      privateKey,
      passphrase,
      // Servers that take passwords only through keyboard-interactive (PAM) get the password there.
      tryKeyboard: password !== undefined,
      readyTimeout: tuning.readyTimeoutMs,
      keepaliveInterval: tuning.keepaliveIntervalMs,
      keepaliveCountMax: tuning.keepaliveCountMax,
      hostVerifier: (key: Buffer) => {
        const digest = createHash('sha256').update(key).digest();
        seen.fingerprint = `SHA256:${digest.toString('base64').replace(/=+$/, '')}`;
        if (pin === null) return true;
        const ok = timingSafeEqual(digest, pin);
        seen.mismatch = !ok;
        return ok;
      },
    }),
  };
}

/** Two endpoints of the same server and the same credentials (see `SftpEndpoint.account`). */
export function sameAccount(a: SftpEndpoint, b: SftpEndpoint): boolean {
  return sameAuthority(a.account, b.account);
}

/** The 32 bytes of a pinned `SHA256:<base64>` fingerprint (prefix and padding optional), or null when unset. */
export function pinnedDigest(value: unknown): Buffer | null {
  if (value === undefined || value === null || value === '') return null;
  const b64 = typeof value === 'string' ? value.replace(/^SHA256:/, '') : '';
  const digest = Buffer.from(b64, 'base64');
  if (!/^[A-Za-z0-9+/]{43}=?$/.test(b64) || digest.length !== 32) {
    throw new ConnectorError('AUTH', 'options.host_key_sha256 must be a SHA256 fingerprint as printed by ssh-keygen -l (SHA256:...)');
  }
  return digest;
}

function stringField(record: Readonly<Record<string, unknown>>, key: string): string | undefined {
  const value = record[key];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

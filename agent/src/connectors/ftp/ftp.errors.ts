import { FTPError } from 'basic-ftp';
import { ConnectorError } from '../types.js';
import { networkMessages } from '../network-errors.js';

const NETWORK = networkMessages('an FTP server');

/** Node's codes for a TLS certificate that does not verify. */
const UNTRUSTED = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|UNABLE_TO_GET_ISSUER|ERR_TLS_CERT_ALTNAME_INVALID/;

/** The FTP reply code of a basic-ftp error, or undefined for other errors (socket and TLS errors carry string codes). */
export function replyCode(err: unknown): number | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof FTPError && typeof code === 'number' ? code : undefined;
}

/**
 * An error of an FTP command on `path` (a connector path) as a ConnectorError. The reply code
 * decides: 530 AUTH, 4xx TRANSIENT, 550 NOT_FOUND or PERMISSION by the server's words (the
 * connector probes first where the words are ambiguous, as vsftpd's are), 552/553 CONFLICT
 * unless the words say permission, 502/504 UNSUPPORTED. Socket faults and timeouts are TRANSIENT.
 */
export function ftpError(err: unknown, path: string, op: string): ConnectorError {
  if (err instanceof ConnectorError) return err;
  const shown = `${op} ${path === '' ? '/' : path}`;
  const code = replyCode(err);
  const e = err as (Error & { code?: unknown }) | null;
  if (code !== undefined) {
    const reply = (e?.message ?? '').trim();
    const denied = /permission|denied|not permitted|not allowed|refused|access/i.test(reply);
    if (code === 530) return new ConnectorError('AUTH', `${shown}: not logged in (server: ${reply})`, { cause: err });
    if (code >= 400 && code < 500) return new ConnectorError('TRANSIENT', `${shown}: the server is temporarily unable (server: ${reply})`, { cause: err });
    if (code === 550) return new ConnectorError(denied ? 'PERMISSION' : 'NOT_FOUND', `${shown}: ${denied ? 'permission denied' : 'does not exist'} (server: ${reply})`, { cause: err });
    if (code === 502 || code === 504) return new ConnectorError('UNSUPPORTED', `${shown}: not supported by the server (server: ${reply})`, { cause: err });
    return new ConnectorError(denied ? 'PERMISSION' : 'CONFLICT', `${shown}: the server refused (server: ${reply})`, { cause: err });
  }
  if (e?.name === 'AbortError') return new ConnectorError('TRANSIENT', `${shown}: aborted`, { cause: err });
  if (typeof e?.code === 'string' && NETWORK[e.code]) return new ConnectorError('TRANSIENT', `${shown}: ${NETWORK[e.code]}`, { cause: err });
  // basic-ftp: "Server sent FIN packet unexpectedly", "Timeout (control socket)", "Client is closed".
  return new ConnectorError('TRANSIENT', `${shown}: ${e?.message ?? String(err)}`, { cause: err });
}

/**
 * An error of connecting and logging in to `where` (user@host:port), with a message that says
 * what to fix: the host name, the port, the credentials, TLS or the certificate.
 */
export function connectError(err: unknown, where: string): ConnectorError {
  if (err instanceof ConnectorError) return err;
  // OpenSSL's messages span lines; a message for the user is one line.
  if (err instanceof Error) err.message = err.message.replace(/\s+/g, ' ').trim();
  const e = err as (Error & { code?: unknown }) | null;
  const code = replyCode(err);
  if (code === 530) return new ConnectorError('AUTH', `login failed for ${where}: wrong username or password (server: ${e!.message.trim()})`, { cause: err });
  if (code !== undefined && code >= 400 && code < 500) {
    return new ConnectorError('TRANSIENT', `connecting to ${where}: the server is busy or unavailable (server: ${e!.message.trim()})`, { cause: err });
  }
  if (code !== undefined) return new ConnectorError('AUTH', `login refused for ${where} (server: ${e!.message.trim()})`, { cause: err });
  if (typeof e?.code === 'string' && NETWORK[e.code]) return new ConnectorError('TRANSIENT', `connecting to ${where}: ${NETWORK[e.code]}`, { cause: err });
  if (typeof e?.code === 'string' && UNTRUSTED.test(e.code)) {
    return new ConnectorError('AUTH', `connecting to ${where}: the server's TLS certificate is not trusted (${e.message}); pin it with options.tls_cert_sha256`, { cause: err });
  }
  if (typeof e?.code === 'string' && e.code.startsWith('ERR_SSL')) {
    return new ConnectorError('UNSUPPORTED', `connecting to ${where}: TLS handshake failed (${e.message}); check options.secure`, { cause: err });
  }
  return new ConnectorError('TRANSIENT', `connecting to ${where}: ${e?.message ?? String(err)}`, { cause: err });
}

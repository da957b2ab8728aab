import { pino, type DestinationStream, type Logger } from 'pino';
import type { LogLevel } from './config.js';

/**
 * Fields that may hold secrets, wherever they appear in a log object: they are replaced, never
 * printed. The agent does not put its token or any credential in a log line; this is the net
 * under that rule.
 */
export const REDACT_PATHS = [
  'token', '*.token', 'authorization', '*.authorization', 'headers.authorization', '*.headers.authorization',
  'credentials', '*.credentials', '*.*.credentials', 'password', '*.password', 'secret', '*.secret',
  'secret_access_key', '*.secret_access_key', 'private_key', '*.private_key', 'passphrase', '*.passphrase',
  'account_key', '*.account_key', 'connection_string', '*.connection_string', 'client_secret', '*.client_secret',
  'refresh_token', '*.refresh_token',
];

/** Structured JSON lines to stderr (stdout stays free for `--help`/`--version`), synchronously so nothing is lost at exit. */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      name: 'xfer-agent',
      level,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination ?? pino.destination({ fd: 2, sync: true }),
  );
}

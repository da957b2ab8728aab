import { ConnectorError } from '../connectors/types.js';

/** The bytes read from the source do not match its listing: it changed while being copied. Not retried. */
export class SourceChangedError extends Error {
  override readonly name = 'SourceChangedError';
}

/** The destination does not hold what was sent (size or checksum). Retried, then the file fails. */
export class VerifyError extends Error {
  override readonly name = 'VerifyError';
}

/** A job-level failure before or around the per-file work (missing source path, bad destination). */
export class CopyJobError extends Error {
  override readonly name = 'CopyJobError';
}

/** Worth another attempt: a transient connector fault, or a verification mismatch (corruption in transit). */
export function isRetryable(err: unknown): boolean {
  return err instanceof VerifyError || (err instanceof ConnectorError && err.transient);
}

/** A short, secret-free reason for a file's failure. */
export function reasonOf(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

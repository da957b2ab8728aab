import { shownPath } from './paths.js';
import { ConnectorError } from './types.js';

/** An abort of `signal` during `op` on `rel`, as the contract's error (TRANSIENT, the reason as its cause). */
export function abortedError(op: string, rel: string, signal: AbortSignal): ConnectorError {
  return new ConnectorError('TRANSIENT', `${op} ${shownPath(rel)}: aborted`, { cause: signal.reason });
}

import { PassThrough, type Readable } from 'node:stream';
import { ConnectorError } from '../types.js';

/**
 * A download body of an Azure SDK as a stream of our own, so that every error the reader sees is
 * a ConnectorError (`mapError`), and an abort of `signal` ends it TRANSIENT at once, even while
 * the service stalls. Destroying the returned stream destroys the body (its socket).
 */
export function connectorReadStream(source: Readable, what: string, mapError: (err: unknown) => ConnectorError, signal?: AbortSignal): Readable {
  const out = new PassThrough({ highWaterMark: 1024 * 1024 });
  source.once('error', (err) => out.destroy(mapError(err)));
  out.once('close', () => source.destroy());
  if (signal) {
    const onAbort = () => out.destroy(new ConnectorError('TRANSIENT', `read ${what}: aborted`, { cause: signal.reason }));
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    out.once('close', () => signal.removeEventListener('abort', onAbort));
  }
  source.pipe(out);
  return out;
}

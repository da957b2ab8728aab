import type { Readable } from 'node:stream';
import { guardWrite } from '@xfer/storage';
import { ConnectorError } from './types.js';

/**
 * @xfer/storage's write guard in the connector contract's terms, for the uploading connectors
 * (s3, blob, fileshare): the base path is no file; an abort destroys the body and ends the
 * write `aborted` (TRANSIENT); any other failure is what `mapError` makes of it, after the body
 * was destroyed and `cleanup` removed what was written.
 */
export function guardUpload<T>(
  rel: string,
  body: Readable,
  o: { signal?: AbortSignal; what: string; mapError: (err: unknown) => ConnectorError; cleanup?: () => Promise<unknown> },
  upload: () => Promise<T>,
): Promise<T> {
  if (rel === '') return Promise.reject(new ConnectorError('CONFLICT', `write /: the base path is a directory, not ${o.what}`));
  const { signal } = o;
  const aborted = () => new ConnectorError('TRANSIENT', `write ${rel}: aborted`, { cause: signal?.reason });
  return guardWrite(body, { signal, aborted, mapError: o.mapError, cleanup: o.cleanup }, upload);
}

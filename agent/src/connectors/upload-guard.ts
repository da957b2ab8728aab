import type { Readable } from 'node:stream';
import { ConnectorError } from './types.js';

/**
 * The part of a `write` every uploading connector (s3, blob, fileshare) shares: the base path is
 * no file; an abort destroys the body, so a stalled source cannot keep the write waiting for its
 * next chunk; the body's errors reach `upload` through its iteration, never as an unhandled
 * 'error' event before it starts; on failure the body is destroyed, `cleanup` removes what was
 * written, and the error is `aborted` when the signal caused it, else what `mapError` makes of it.
 */
export async function guardUpload<T>(
  rel: string,
  body: Readable,
  o: { signal?: AbortSignal; what: string; mapError: (err: unknown) => ConnectorError; cleanup?: () => Promise<unknown> },
  upload: () => Promise<T>,
): Promise<T> {
  const { signal } = o;
  if (rel === '') throw new ConnectorError('CONFLICT', `write /: the base path is a directory, not ${o.what}`);
  const aborted = () => new ConnectorError('TRANSIENT', `write ${rel}: aborted`, { cause: signal?.reason });
  if (signal?.aborted) {
    body.destroy();
    throw aborted();
  }
  const ignore = () => undefined;
  body.on('error', ignore);
  const onAbort = () => body.destroy(aborted());
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await upload();
  } catch (err) {
    body.destroy();
    await o.cleanup?.().catch(() => undefined);
    if (signal?.aborted) throw aborted();
    throw o.mapError(err);
  } finally {
    signal?.removeEventListener('abort', onAbort);
    body.off('error', ignore);
  }
}

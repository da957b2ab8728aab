import { PassThrough, Writable, type Readable } from 'node:stream';
import { shownPath } from '../paths.js';
import { ConnectorError } from '../types.js';
import { ftpError, replyCode } from './ftp.errors.js';
import type { FtpLease } from './ftp.pool.js';

/**
 * Streams bytes `start..end` (inclusive) of `remote` through the leased client: RETR after REST
 * `start`, piped with backpressure. FTP has no end offset: once `end` is reached the control
 * connection is closed (ABOR is unreliable across servers) and the client dropped from the pool.
 * Resolves once the first bytes arrived or the transfer ended, so that a refused RETR rejects
 * here (PERMISSION: the caller saw the file with SIZE). The lease is released when the stream ends.
 */
export async function rangeStream(
  lease: FtpLease, remote: string, rel: string, range: { start: number; end: number; size: number }, signal?: AbortSignal,
): Promise<Readable> {
  const { start, end, size } = range;
  const out = new PassThrough();
  let remaining = end - start + 1;
  let done = false;
  let started!: () => void;
  let failed!: (err: unknown) => void;
  const firstBytes = new Promise<void>((resolve, reject) => {
    started = resolve;
    failed = reject;
  });
  const finish = (broken: boolean) => {
    if (done) return;
    done = true;
    signal?.removeEventListener('abort', onAbort);
    if (broken) lease.client.close();
    lease.release(broken);
  };
  const onAbort = () => out.destroy(new ConnectorError('TRANSIENT', `read ${shownPath(rel)}: aborted`, { cause: signal?.reason }));
  signal?.addEventListener('abort', onAbort, { once: true });
  // The consumer went away (destroyed, aborted) before the last byte: cut the transfer. After it,
  // the server's closing reply is still due: the download's completion returns the client.
  out.once('close', () => {
    if (remaining > 0) finish(true);
  });

  const sink = new Writable({
    highWaterMark: 64 * 1024,
    write(chunk: Buffer, _encoding, callback) {
      started();
      if (done || remaining <= 0) return callback();
      const piece = chunk.length > remaining ? chunk.subarray(0, remaining) : chunk;
      remaining -= piece.length;
      const more = out.write(piece);
      if (remaining === 0) {
        out.end();
        // The rest of the file is not wanted: drop the connection rather than read it.
        if (end < size - 1) finish(true);
        return callback();
      }
      if (more) callback();
      else out.once('drain', () => callback());
    },
  });

  lease.client.downloadTo(sink, remote, start).then(
    () => {
      started();
      if (!done) {
        out.end();
        finish(false);
      }
    },
    (err: unknown) => {
      // Cut by us (range end, consumer gone, abort) or by the server: either way read() must settle.
      const mapped = signal?.aborted || (done && remaining > 0)
        ? new ConnectorError('TRANSIENT', `read ${shownPath(rel)}: aborted`, { cause: err })
        : replyCode(err) === 550
          ? new ConnectorError('PERMISSION', `read ${shownPath(rel)}: the server refused to open the file (server: ${(err as Error).message.trim()})`, { cause: err })
          : ftpError(err, rel, 'read');
      failed(mapped);
      if (done) return;
      finish(true);
      out.destroy(mapped);
    },
  );
  // Until the caller has the stream (or read() rejected), an error must not be an unhandled 'error'
  // event; the stream stays errored, so the caller's pipeline or iteration still sees it.
  const swallow = () => undefined;
  out.on('error', swallow);
  // Stays on when read() rejects: nobody has the stream then.
  await firstBytes;
  out.off('error', swallow);
  return out;
}


import type { Readable } from 'node:stream';
import type { SFTPWrapper } from 'ssh2';
import { ReadAtStream } from '../io/read-at.js';
import { pipelinedWriteAt } from '../io/write-at.js';
import { closeFile, readAt, writeAt } from './sftp.ops.js';
import { sftpError } from './sftp.errors.js';

/**
 * Reads `[start, end]` of an open remote file with up to `depth` READ requests in flight
 * (io/read-at.ts), so a file streams at the link's bandwidth rather than one round trip per chunk
 * (ssh2's own read stream has one request in flight). Closes the handle (unless `closeHandle` is
 * false) and calls `onClose` exactly once however the stream ends; every error it emits is a
 * ConnectorError.
 */
export function sftpReadStream(
  sftp: SFTPWrapper,
  handle: Buffer,
  path: string,
  start: number,
  end: number,
  tuning: { chunkBytes: number; depth: number },
  onClose: () => void,
  /** The bytes at `start`, already read (with the size, when the file was opened). */
  prefetched?: Buffer,
  /** False: the handle stays open when the stream ends (a RangeReader's, closed by its owner). */
  closeHandle = true,
): Readable {
  return new ReadAtStream(start, end, {
    readAt: async (offset, length) => ({ data: await readAt(sftp, handle, length, offset) }),
    fail: (err) => sftpError(err, path, 'read'),
    mapDestroyError: true,
    chunkBytes: tuning.chunkBytes,
    depth: tuning.depth,
    highWaterMark: tuning.chunkBytes * 2,
    prefetched,
    // The handle is closed in the background (nobody waits for a read handle's close: a round
    // trip per file saved); the session slot is given back once it is closed.
    onClose: closeHandle ? () => void closeFile(sftp, handle).catch(() => undefined).finally(onClose) : onClose,
  });
}

/**
 * Writes `body` to an open remote file from offset 0 with up to `depth` WRITE requests of
 * `chunkBytes` in flight (io/write-at.ts). Resolves with the bytes written once the server has
 * acknowledged every request. The caller closes the handle.
 */
export function pipelinedWrite(sftp: SFTPWrapper, handle: Buffer, body: AsyncIterable<unknown>, tuning: { chunkBytes: number; depth: number }): Promise<number> {
  return pipelinedWriteAt(body, { ...tuning, writeAt: (data, offset) => writeAt(sftp, handle, data, offset) });
}

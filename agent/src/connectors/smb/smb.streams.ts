import type { Readable } from 'node:stream';
import type { SmbClient } from './smb.client.js';
import { ReadAtStream } from '../io/read-at.js';
import { pipelinedWriteAt } from '../io/write-at.js';

/**
 * Bytes `start..end` (inclusive) of an open file as a stream: up to `depth` READ requests of
 * `chunk` bytes in flight (io/read-at.ts), so memory stays at `depth × chunk` whatever the file
 * size. A short answer is completed before the next chunk; an empty one (the file shrank) ends
 * the stream. The handle is closed at the end, on error and on destroy. Errors go through `fail`.
 */
export function readStream(
  client: SmbClient,
  fileId: Buffer,
  range: { start: number; end: number },
  o: { depth: number; chunk: number; signal?: AbortSignal; fail: (err: unknown) => Error },
): Readable {
  const { signal } = o;
  return new ReadAtStream(range.start, range.end, {
    readAt: async (offset, length) => ({ data: await client.read(fileId, offset, length, signal) }),
    fail: o.fail,
    chunkBytes: o.chunk,
    depth: o.depth,
    signal,
    aborted: () => signal?.reason,
    onClose: () => void client.closeQuietly(fileId),
  });
}

/**
 * Writes `body` to an open file from offset 0 in WRITE requests of `chunk` bytes, up to `depth`
 * in flight (io/write-at.ts). Resolves with the bytes written once every WRITE was answered;
 * rejects with the first failure.
 */
export function writeBody(client: SmbClient, fileId: Buffer, body: Readable, o: { depth: number; chunk: number; signal?: AbortSignal }): Promise<number> {
  return pipelinedWriteAt(body, {
    chunkBytes: o.chunk,
    depth: o.depth,
    writeAt: async (data, at) => {
      const count = await client.write(fileId, at, data, o.signal);
      if (count !== data.length) throw new Error(`the server wrote ${count} of ${data.length} bytes at offset ${at}`);
    },
  });
}

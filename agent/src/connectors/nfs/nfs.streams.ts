import type { Readable } from 'node:stream';
import { ConnectorError } from '../types.js';
import { ReadAtStream } from '../io/read-at.js';
import { pipelinedWriteAt } from '../io/write-at.js';
import { UNSTABLE, type FileHandle, type Nfs3 } from './nfs3.protocol.js';

/**
 * Bytes `[start, end]` of a file, with up to `depth` READs of `chunkBytes` in flight, pushed in
 * order (io/read-at.ts), so memory stays at depth × chunkBytes whatever the file size. A short
 * reply that is not at end of file asks for the rest; a file that ended early (truncated
 * meanwhile) ends the stream there.
 */
export function nfsReadStream(
  nfs: Nfs3,
  fh: FileHandle,
  start: number,
  end: number,
  io: { chunkBytes: number; depth: number; signal?: AbortSignal; fail: (err: unknown) => ConnectorError },
): Readable {
  const { signal } = io;
  return new ReadAtStream(start, end, {
    readAt: (offset, length) => nfs.read(fh, offset, length, signal),
    fail: io.fail,
    chunkBytes: io.chunkBytes,
    depth: io.depth,
    signal,
    aborted: () => new ConnectorError('TRANSIENT', 'aborted', { cause: signal?.reason }),
  });
}

/**
 * Streams `body` into the file behind `fh` from offset 0: chunks gathered into WRITEs of
 * `chunkBytes`, UNSTABLE (the server may cache them), up to `depth` in flight (io/write-at.ts),
 * then one COMMIT. Every reply carries the server's write verifier; a different one on a later
 * WRITE or on the COMMIT means the server restarted and may have lost unstable data. Re-sending
 * would need every byte since the start kept in memory, so the write fails TRANSIENT instead and
 * the engine writes the file again. Resolves with the bytes written.
 */
export async function writeBody(nfs: Nfs3, fh: FileHandle, body: AsyncIterable<unknown>, io: { chunkBytes: number; depth: number; signal?: AbortSignal }): Promise<number> {
  let verifier: Buffer | null = null;
  const checkVerifier = (verf: Buffer) => {
    verifier ??= verf;
    if (!verifier.equals(verf)) {
      throw new ConnectorError('TRANSIENT', 'the server restarted during the write (its write verifier changed): unstable data may be lost, write the file again');
    }
  };
  const writeAt = async (data: Buffer, offset: number) => {
    while (data.length > 0) {
      const { count, verf } = await nfs.write(fh, offset, data, UNSTABLE, io.signal);
      checkVerifier(verf);
      if (count === 0) throw new ConnectorError('TRANSIENT', 'the server accepted no bytes of a WRITE');
      data = data.subarray(count);
      offset += count;
    }
  };
  const size = await pipelinedWriteAt(body, { chunkBytes: io.chunkBytes, depth: io.depth, writeAt });
  if (io.signal?.aborted) throw new ConnectorError('TRANSIENT', 'aborted', { cause: io.signal.reason });
  checkVerifier(await nfs.commit(fh, io.signal));
  return size;
}

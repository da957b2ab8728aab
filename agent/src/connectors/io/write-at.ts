import { InflightWindow } from '@xfer/storage';

/**
 * Writes `body` to an offset-addressed handle from offset 0, the pipelined WRITE of the sftp,
 * nfs and smb connectors: the body's chunks are gathered into requests of `chunkBytes` (a body
 * of 16 KiB chunks still goes out in full-sized requests), up to `depth` in flight; the body is
 * read on only while fewer are outstanding, so memory stays at about depth × chunkBytes. Resolves
 * with the bytes written once every request was answered; rejects with the first failure. On
 * failure too, it returns only once no request is in flight: the caller may close or remove the
 * file right after.
 *
 * `writeAt` writes all of `data` at `offset` (a protocol that may accept fewer bytes loops or
 * fails there).
 */
export async function pipelinedWriteAt(
  body: AsyncIterable<unknown>,
  o: { chunkBytes: number; depth: number; writeAt: (data: Buffer, offset: number) => Promise<unknown> },
): Promise<number> {
  const window = new InflightWindow(o.depth);
  let offset = 0;
  const send = (data: Buffer) => {
    window.add(o.writeAt(data, offset));
    offset += data.length;
  };
  let gathered: Buffer[] = [];
  let gatheredBytes = 0;
  try {
    for await (const piece of body) {
      window.check();
      const chunk = toBuffer(piece);
      if (chunk.length === 0) continue;
      gathered.push(chunk);
      gatheredBytes += chunk.length;
      if (gatheredBytes < o.chunkBytes) continue;
      const all = gathered.length === 1 ? gathered[0]! : Buffer.concat(gathered, gatheredBytes);
      let at = 0;
      for (; all.length - at >= o.chunkBytes; at += o.chunkBytes) {
        send(all.subarray(at, at + o.chunkBytes));
        await window.slot();
      }
      gathered = at < all.length ? [all.subarray(at)] : [];
      gatheredBytes = all.length - at;
    }
    if (gatheredBytes > 0) send(gathered.length === 1 ? gathered[0]! : Buffer.concat(gathered, gatheredBytes));
    await window.drain();
    return offset;
  } finally {
    await window.settle();
  }
}

function toBuffer(piece: unknown): Buffer {
  if (Buffer.isBuffer(piece)) return piece;
  if (typeof piece === 'string') return Buffer.from(piece);
  return Buffer.from(piece as Uint8Array);
}

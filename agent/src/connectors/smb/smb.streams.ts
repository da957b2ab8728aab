import { Readable } from 'node:stream';
import type { SmbClient } from './smb.client.js';

/**
 * Bytes `start..end` (inclusive) of an open file as a stream: up to `depth` READ requests of
 * `chunk` bytes in flight, issued only as the consumer pulls (Readable.from asks for the next
 * chunk when its buffer drains), so memory stays at `depth × chunk` whatever the file size.
 * A short answer is completed before the next chunk; an empty one (the file shrank) ends the
 * stream. The handle is closed at the end, on error and on destroy. Errors go through `fail`.
 */
export function readStream(
  client: SmbClient,
  fileId: Buffer,
  range: { start: number; end: number },
  o: { depth: number; chunk: number; signal?: AbortSignal; fail: (err: unknown) => Error },
): Readable {
  async function* chunks(): AsyncGenerator<Buffer> {
    const window: { offset: number; length: number; data: Promise<Buffer> }[] = [];
    let next = range.start;
    try {
      for (;;) {
        while (window.length < o.depth && next <= range.end) {
          const length = Math.min(o.chunk, range.end - next + 1);
          const data = client.read(fileId, next, length, o.signal);
          data.catch(() => undefined);
          window.push({ offset: next, length, data });
          next += length;
        }
        const head = window.shift();
        if (!head) return;
        let data = await head.data;
        if (data.length === 0) return;
        yield data;
        for (let got = data.length; got < head.length; got += data.length) {
          data = await client.read(fileId, head.offset + got, head.length - got, o.signal);
          if (data.length === 0) return;
          yield data;
        }
      }
    } catch (err) {
      throw o.fail(err);
    } finally {
      void client.closeQuietly(fileId);
    }
  }
  const stream = Readable.from(chunks(), { objectMode: false, highWaterMark: o.chunk });
  if (o.signal) {
    const signal = o.signal;
    const onAbort = () => stream.destroy(o.fail(signal.reason));
    signal.addEventListener('abort', onAbort, { once: true });
    stream.once('close', () => signal.removeEventListener('abort', onAbort));
  }
  return stream;
}

/**
 * Writes `body` to an open file from offset 0 in WRITE requests of `chunk` bytes, up to `depth`
 * in flight: the body is pulled only while fewer are outstanding, so memory stays bounded.
 * Resolves with the bytes written once every WRITE was answered; rejects with the first failure.
 */
export async function writeBody(client: SmbClient, fileId: Buffer, body: Readable, o: { depth: number; chunk: number; signal?: AbortSignal }): Promise<number> {
  const inFlight: Promise<void>[] = [];
  let offset = 0;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const send = (data: Buffer) => {
    const at = offset;
    offset += data.length;
    const done = client.write(fileId, at, data, o.signal).then((count) => {
      if (count !== data.length) throw new Error(`the server wrote ${count} of ${data.length} bytes at offset ${at}`);
    });
    done.catch(() => undefined);
    inFlight.push(done);
  };
  for await (const chunk of body) {
    const buf = chunk as Buffer;
    if (buf.length === 0) continue;
    pending.push(buf);
    pendingBytes += buf.length;
    if (pendingBytes < o.chunk) continue;
    const all = pending.length === 1 ? pending[0]! : Buffer.concat(pending);
    let at = 0;
    for (; all.length - at >= o.chunk; at += o.chunk) {
      send(all.subarray(at, at + o.chunk));
      if (inFlight.length >= o.depth) await inFlight.shift();
    }
    pending = at < all.length ? [all.subarray(at)] : [];
    pendingBytes = all.length - at;
  }
  if (pendingBytes > 0) send(Buffer.concat(pending));
  await Promise.all(inFlight);
  return offset;
}

import type { IncomingMessage } from 'node:http';

/**
 * The bytes of an HTTP answer's body, skipping `skip` and stopping after `limit` (a ranged read
 * of a server that answered 200 with the whole file, or more than asked); shared by the HTTP
 * connectors (onedrive, webdav). Every error, an abort and a body cut short included, goes
 * through `fail` (the connector's mapping to a ConnectorError). The answer is destroyed unless it
 * was read to its end, so an early stop frees the socket.
 */
export async function* bodyChunks(
  body: IncomingMessage,
  opts: { skip: number; limit: number; signal?: AbortSignal; fail: (err: unknown) => Error },
): AsyncIterable<Buffer> {
  let skip = opts.skip;
  let left = opts.limit;
  try {
    for await (const data of body) {
      if (opts.signal?.aborted) throw opts.fail(opts.signal.reason);
      let chunk = data as Buffer;
      if (skip > 0) {
        const cut = Math.min(skip, chunk.length);
        skip -= cut;
        chunk = chunk.subarray(cut);
      }
      if (chunk.length > left) chunk = chunk.subarray(0, left);
      left -= chunk.length;
      if (chunk.length > 0) yield chunk;
      if (left <= 0) return;
    }
    // A connection cut mid-body ends the stream early on some Node versions instead of erroring.
    if (!body.complete) throw new Error('the connection closed before the whole body arrived');
  } catch (err) {
    throw opts.fail(err);
  } finally {
    if (!body.readableEnded) body.destroy();
  }
}

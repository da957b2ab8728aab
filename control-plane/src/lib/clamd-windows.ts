import { PassThrough, type Readable } from 'node:stream';
import { instream, prematureClose, type ClamdAddress, type InstreamOptions, type ScanVerdict } from './clamd.js';

export interface WindowOptions extends InstreamOptions {
  /** Most bytes one INSTREAM session gets (clamd scans at most CLAMD_MAX_SCAN_BYTES of a stream). */
  windowBytes: number;
  /** Bytes each window repeats from the end of the one before. */
  overlapBytes: number;
}

/**
 * Scans a stream of any length as consecutive INSTREAM sessions ("windows") of at most
 * `windowBytes`, each starting with the last `overlapBytes` of the window before, so any byte
 * pattern no longer than the overlap lies whole inside some window. A stream that fits in one
 * window is one ordinary session: exactly `instream`. Windows run back to back while the stream
 * flows (the next starts as the previous waits for its verdict); memory stays bounded by the
 * overlap plus a chunk. The first infected window decides; any failure rejects (fail closed) and
 * stops every session.
 */
export function instreamWindows(address: ClamdAddress, source: Readable, opts: WindowOptions): Promise<ScanVerdict> {
  if (opts.overlapBytes >= opts.windowBytes) throw new Error('overlapBytes must be smaller than windowBytes');
  if (source.readableDidRead) {
    return Promise.reject(new Error('The stream to scan was already read from: its first bytes would go unscanned'));
  }
  source.pause();
  const stop = new AbortController();
  const onOuterAbort = () => stop.abort(opts.signal!.reason);
  if (opts.signal?.aborted) return Promise.reject(opts.signal.reason);
  opts.signal?.addEventListener('abort', onOuterAbort, { once: true });

  const sessions: Promise<ScanVerdict>[] = [];
  let window!: PassThrough;
  let room = 0;
  /** The last `overlapBytes` sent, as chunks: the start of the next window. */
  let tail: Buffer[] = [];
  let tailBytes = 0;

  const remember = (chunk: Buffer) => {
    tail.push(chunk);
    tailBytes += chunk.length;
    while (tailBytes - tail[0]!.length >= opts.overlapBytes) tailBytes -= tail.shift()!.length;
  };
  const open = () => {
    window = new PassThrough({ highWaterMark: 1024 * 1024 });
    room = opts.windowBytes;
    // Like a single session, nothing is read before clamd accepted the first connection (an
    // unreachable clamd consumes nothing); later windows open while the stream already flows.
    const onConnect = sessions.length === 0 ? () => source.resume() : undefined;
    // A failing session ends them all (fail closed). A finding does not: like a single session,
    // the verdict comes once the whole stream was read, so a caller teeing it never stalls.
    sessions.push(instream(address, window, { timeoutMs: opts.timeoutMs, signal: stop.signal, onConnect }).catch((err: unknown) => {
      stop.abort(err);
      throw err;
    }));
    const overlap = Buffer.concat(tail).subarray(Math.max(0, tailBytes - opts.overlapBytes));
    tail = [];
    tailBytes = 0;
    if (overlap.length > 0) send(overlap);
  };
  const send = (chunk: Buffer) => {
    room -= chunk.length;
    remember(chunk);
    if (!window.write(chunk)) {
      source.pause();
      window.once('drain', () => source.resume());
    }
  };

  const fed = new Promise<void>((resolve, reject) => {
    const finish = (err?: unknown) => {
      source.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
      stop.signal.removeEventListener('abort', onStop);
      if (err === undefined) resolve();
      else reject(err);
    };
    function onData(chunk: Buffer | string) {
      let data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      while (data.length > 0) {
        if (room === 0) {
          window.end();
          open();
        }
        const part = data.subarray(0, room);
        data = data.subarray(part.length);
        send(part);
      }
    }
    function onEnd() {
      window.end();
      finish();
    }
    // Failures end every session through `stop` (a window destroyed with an error before its
    // session connected would have no listener yet).
    function onClose() {
      if (!source.readableEnded) stop.abort(prematureClose());
    }
    function onStop() {
      source.pause();
      window.destroy();
      finish(stop.signal.reason);
    }
    stop.signal.addEventListener('abort', onStop, { once: true });
    open();
    function onError(err: Error) {
      stop.abort(err);
    }
    source.on('data', onData).once('end', onEnd).once('error', onError).once('close', onClose);
    // Attaching 'data' set the source flowing: hold it until the first session is connected.
    source.pause();
  });

  return (async () => {
    try {
      const feeding = await fed.then(() => null, (err: unknown) => ({ err }));
      // Every window is open once the stream has ended (or failed): wait for all their verdicts.
      const verdicts = await Promise.allSettled(sessions);
      if (feeding) throw feeding.err;
      const failed = verdicts.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
      const found = verdicts.find((r): r is PromiseFulfilledResult<ScanVerdict> => r.status === 'fulfilled' && !r.value.clean);
      return found ? found.value : { clean: true };
    } finally {
      opts.signal?.removeEventListener('abort', onOuterAbort);
    }
  })();
}

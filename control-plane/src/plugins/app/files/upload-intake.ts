import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { PassThrough, Transform, Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyBaseLogger } from 'fastify';
import { fileTypeFromBuffer } from 'file-type';
import mime from 'mime-types';
import { PayloadTooLargeError, ServiceUnavailableError } from '../../../errors.js';
import type { PendingObject, FileStore } from './store/index.js';
import type { ScanVerdict, Scanner } from './scanner.js';

/** Bytes file-type looks at (its own `reasonableDetectionSizeInBytes`). */
const SNIFF_BYTES = 4100;

/** One file's content once it has streamed through the scanner and into the store. */
export interface ScannedContent {
  verdict: ScanVerdict;
  /** The stored content, not yet committed (null only when the scan blocked it and the store had failed). */
  pending: PendingObject | null;
  size: number;
  sha256: string;
  mimeType: string;
}

/** What one upload request carried, once its body has been read to the end. */
export interface ReceivedUpload {
  /** Normalized folder (`/` when the form had no `path` part). */
  folder: string;
  name: string;
  size: number;
  sha256: string;
  mimeType: string;
  /** The scanned content, not yet committed; the caller commits or discards it. */
  pending: PendingObject;
}

/** An upload the scanner blocked: nothing was kept, the caller answers 422. */
export interface BlockedUpload {
  blocked: true;
  folder: string;
  name: string;
  size: number;
  sha256: string;
  signature: string;
}

/** What the intake streams into. */
export interface IntakeOptions {
  scanner: Scanner;
  store: FileStore;
  /** config.uploadMaxBytes: one byte more is 413. */
  uploadMaxBytes: number;
  log: FastifyBaseLogger;
}

/**
 * A limit tighter than `uploadMaxBytes` for one upload (a data room's remaining quota), and the
 * 413 message that names it.
 */
export interface UploadLimit {
  maxBytes: number;
  message: string;
}

/** Counts bytes and fails the stream with 413 the moment there is one too many. */
function sizeLimiter(limit: UploadLimit): Transform & { bytes: number } {
  const limiter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      limiter.bytes += chunk.length;
      if (limiter.bytes > limit.maxBytes) return callback(new PayloadTooLargeError(limit.message));
      callback(null, chunk);
    },
  }) as Transform & { bytes: number };
  limiter.bytes = 0;
  return limiter;
}

/** Hashes every byte and keeps the first ones for content sniffing, as they pass (no second read). */
function inspector() {
  const hash = createHash('sha256');
  const head: Buffer[] = [];
  let headBytes = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      hash.update(chunk);
      if (headBytes < SNIFF_BYTES) {
        const piece = chunk.subarray(0, SNIFF_BYTES - headBytes);
        head.push(Buffer.from(piece));
        headBytes += piece.length;
      }
      callback(null, chunk);
    },
  });
  return { stream, digest: () => hash.digest('hex'), head: () => Buffer.concat(head) };
}

/**
 * Writes every chunk to all `outputs` and takes the next one only when each of them has taken
 * it (`drain`), so the slowest reader paces the upload and nothing piles up in memory. An abort
 * of `signal` ends a wait for a reader that stopped reading.
 */
function tee(outputs: PassThrough[], signal: AbortSignal, onEnd: () => void): Writable {
  return new Writable({
    write(chunk: Buffer, _encoding, callback) {
      const waits = outputs.filter((out) => !out.write(chunk)).map((out) => once(out, 'drain', { signal }));
      if (waits.length === 0) return callback();
      Promise.all(waits).then(() => callback(), callback);
    },
    final(callback) {
      onEnd();
      for (const out of outputs) out.end();
      callback();
    },
    destroy(err, callback) {
      // Also called after a normal finish (autoDestroy): then the readers still have to read the end.
      if (err) for (const out of outputs) out.destroy(err);
      callback(err);
    },
  });
}

/** MIME type from the content's first bytes, else from the name's extension, else octet-stream. */
async function detectMimeType(head: Buffer, name: string): Promise<string> {
  const sniffed = head.length > 0 ? await fileTypeFromBuffer(head) : undefined;
  return (sniffed?.mime ?? (mime.lookup(name) || 'application/octet-stream')).toLowerCase();
}

/**
 * Streams one file's content through the size limit, the hash and the sniffer into a tee that
 * feeds the scanner and the file store at once. Resolves once both are done; rejects (with the
 * first failure: 413, 503, the client gone…) after cleaning up, so nothing of a failed upload is
 * kept. An infected file resolves (its verdict says so) with whatever was stored, for the caller
 * to discard.
 */
export async function scanAndStore(
  options: IntakeOptions, source: Readable & { truncated?: boolean }, name: string, outer: AbortSignal, tighter?: UploadLimit,
): Promise<ScannedContent> {
  const { scanner, store, uploadMaxBytes, log } = options;
  const serviceLimit = { maxBytes: uploadMaxBytes, message: `File exceeds the upload limit of ${uploadMaxBytes} bytes` };
  const limit = tighter && tighter.maxBytes < uploadMaxBytes ? tighter : serviceLimit;
  const controller = new AbortController();
  const { signal } = controller;
  const stop = (reason: unknown) => { if (!signal.aborted) controller.abort(reason); };
  const onOuterAbort = () => stop(outer.reason);
  if (outer.aborted) onOuterAbort();
  else outer.addEventListener('abort', onOuterAbort, { once: true });

  const limiter = sizeLimiter(limit);
  const inspect = inspector();
  const toScanner = new PassThrough();
  const toStore = new PassThrough();
  // Their readers report their own failures; a branch destroyed after its reader let go must
  // not raise an unhandled 'error'.
  for (const branch of [toScanner, toStore]) branch.on('error', () => undefined);
  let streamed = false;

  const piping = pipeline(source, limiter, inspect.stream, tee([toScanner, toStore], signal, () => { streamed = true; }), { signal })
    .catch((err: unknown) => { stop(err); throw err; });
  const scanning = scanner.scan(toScanner, signal).then((verdict) => {
    // A verdict before the last byte: an infected file needs no more bytes; a clean one would
    // leave the tee waiting on a reader that has stopped, so it counts as a scanner failure.
    if (!streamed) stop(verdict.clean ? new ServiceUnavailableError('Malware scanner answered before the end of the file') : verdict);
    return verdict;
  }, (err: unknown) => { stop(err); throw err; });
  const storing = store.write(toStore, signal).catch((err: unknown) => { stop(err); throw err; });

  const [piped, scanned, stored] = await Promise.allSettled([piping, scanning, storing]);
  outer.removeEventListener('abort', onOuterAbort);
  const pending = stored.status === 'fulfilled' ? stored.value : null;
  const verdict = scanned.status === 'fulfilled' ? scanned.value : null;
  const result = async (kept: PendingObject | null): Promise<ScannedContent> => ({
    verdict: verdict!, pending: kept, size: limiter.bytes, sha256: inspect.digest(), mimeType: await detectMimeType(inspect.head(), name),
  });
  // Infected wins over whatever else failed: the caller reports it and discards what was kept.
  if (verdict && !verdict.clean) return result(pending);
  const failure = signal.aborted ? signal.reason : [piped, scanned, stored].find((r) => r.status === 'rejected')?.reason;
  const short = source.truncated
    ? new PayloadTooLargeError(serviceLimit.message)
    : pending && pending.size !== limiter.bytes ? new ServiceUnavailableError(`File store kept ${pending.size} of ${limiter.bytes} bytes`) : null;
  if (failure || short || !verdict || !pending) {
    await pending?.discard().catch((err: unknown) => log.warn({ err }, 'could not discard an upload'));
    throw failure ?? short;
  }
  return result(pending);
}

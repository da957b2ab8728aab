import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { PassThrough, Transform, Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { fileTypeFromBuffer } from 'file-type';
import mime from 'mime-types';
import { BadRequestError, PayloadTooLargeError, ServiceUnavailableError } from '../../errors.js';
import { MULTIPART_FIELD_MAX_BYTES, multipartProblem } from '../../plugins/external/multipart.js';
import type { PendingObject } from '../../plugins/app/files/store/index.js';
import type { ScanVerdict } from '../../plugins/app/files/scanner.js';
import { fileNameProblem, normalizeFolder } from '../../plugins/app/files/files.service.js';

/** Bytes file-type looks at (its own `reasonableDetectionSizeInBytes`). */
const SNIFF_BYTES = 4100;

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

/** The client went away before the body was complete. */
export class ClientGoneError extends BadRequestError {
  constructor() { super('Upload ended before the multipart body was complete'); }
}

/** Counts bytes and fails the stream with 413 the moment there is one too many. */
function sizeLimiter(maxBytes: number): Transform & { bytes: number } {
  const limiter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      limiter.bytes += chunk.length;
      if (limiter.bytes > maxBytes) return callback(new PayloadTooLargeError(`File exceeds the upload limit of ${maxBytes} bytes`));
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
 * Streams one file part through the size limit, the hash and the sniffer into a tee that feeds
 * the scanner and the file store at once. Resolves once both are done; rejects (with the first
 * failure: 413, 503, the client gone…) after cleaning up, so nothing of a failed upload is kept.
 */
async function receiveFile(app: FastifyInstance, source: Readable & { truncated?: boolean }, name: string, outer: AbortSignal) {
  const controller = new AbortController();
  const { signal } = controller;
  const stop = (reason: unknown) => { if (!signal.aborted) controller.abort(reason); };
  const onOuterAbort = () => stop(outer.reason);
  if (outer.aborted) onOuterAbort();
  else outer.addEventListener('abort', onOuterAbort, { once: true });

  const limiter = sizeLimiter(app.config.uploadMaxBytes);
  const inspect = inspector();
  const toScanner = new PassThrough();
  const toStore = new PassThrough();
  // Their readers report their own failures; a branch destroyed after its reader let go must
  // not raise an unhandled 'error'.
  for (const branch of [toScanner, toStore]) branch.on('error', () => undefined);
  let streamed = false;

  const piping = pipeline(source, limiter, inspect.stream, tee([toScanner, toStore], signal, () => { streamed = true; }), { signal })
    .catch((err: unknown) => { stop(err); throw err; });
  const scanning = app.scanner.scan(toScanner, signal).then((verdict) => {
    // A verdict before the last byte: an infected file needs no more bytes; a clean one would
    // leave the tee waiting on a reader that has stopped, so it counts as a scanner failure.
    if (!streamed) stop(verdict.clean ? new ServiceUnavailableError('Malware scanner answered before the end of the file') : verdict);
    return verdict;
  }, (err: unknown) => { stop(err); throw err; });
  const storing = app.fileStore.write(toStore, signal).catch((err: unknown) => { stop(err); throw err; });

  const [piped, scanned, stored] = await Promise.allSettled([piping, scanning, storing]);
  outer.removeEventListener('abort', onOuterAbort);
  const pending = stored.status === 'fulfilled' ? stored.value : null;
  const verdict = scanned.status === 'fulfilled' ? scanned.value : null;
  const result = async (kept: PendingObject | null) => ({
    verdict: verdict!, pending: kept, size: limiter.bytes, sha256: inspect.digest(), mimeType: await detectMimeType(inspect.head(), name),
  });
  // Infected wins over whatever else failed: the caller reports it and discards what was kept.
  if (verdict && !verdict.clean) return result(pending);
  const failure = signal.aborted ? signal.reason : [piped, scanned, stored].find((r) => r.status === 'rejected')?.reason;
  const short = source.truncated
    ? new PayloadTooLargeError(`File exceeds the upload limit of ${app.config.uploadMaxBytes} bytes`)
    : pending && pending.size !== limiter.bytes ? new ServiceUnavailableError(`File store kept ${pending.size} of ${limiter.bytes} bytes`) : null;
  if (failure || short || !verdict || !pending) {
    await pending?.discard().catch((err: unknown) => app.log.warn({ err }, 'could not discard an upload'));
    throw failure ?? short;
  }
  return result(pending);
}

type FileResult = Awaited<ReturnType<typeof receiveFile>>;

/** An upload the scanner blocked: nothing was kept, the caller answers 422. */
export interface BlockedUpload {
  blocked: true;
  folder: string;
  name: string;
  size: number;
  sha256: string;
  signature: string;
}

/**
 * Reads a multipart upload (`path` and `file`, in either order: the content is committed only
 * after the whole body has been read, so a `path` after the file still decides the record).
 * Every failure discards what was stored; the client going away (`signal`) too.
 */
export async function receiveUpload(app: FastifyInstance, request: FastifyRequest, signal: AbortSignal): Promise<ReceivedUpload | BlockedUpload> {
  let folder: string | undefined;
  let fileName: string | undefined;
  let file: FileResult | undefined;
  try {
    for await (const part of request.parts()) {
      if (part.type === 'field') {
        if (part.fieldname === 'file') throw new BadRequestError('Upload part "file" must be a file (a part with a filename)');
        if (part.fieldname !== 'path') throw new BadRequestError(`Upload has unknown part "${part.fieldname}" (allowed: file, path)`);
        if (part.valueTruncated) throw new BadRequestError(`Upload field "path" must be at most ${MULTIPART_FIELD_MAX_BYTES} bytes`);
        folder = normalizeFolder('Upload field "path"', String(part.value));
        continue;
      }
      // A refused file part is not read on: destroying it stops the parser, and the answer
      // closes the connection instead of taking in the rest of a large upload.
      if (part.fieldname !== 'file') {
        part.file.destroy();
        throw new BadRequestError(`Upload has unknown file part "${part.fieldname}"; the file part must be named "file"`);
      }
      const problem = fileNameProblem(part.filename);
      if (problem) {
        part.file.destroy();
        throw new BadRequestError(`Upload file name ${problem}`);
      }
      fileName = part.filename;
      file = await receiveFile(app, part.file, part.filename, signal);
    }
  } catch (err) {
    if (file && !file.verdict.clean) return blocked(file, fileName!, folder);
    await file?.pending?.discard().catch((e: unknown) => app.log.warn({ err: e }, 'could not discard an upload'));
    if (signal.aborted) throw signal.reason;
    throw multipartProblem(err);
  }
  if (!file || fileName === undefined) throw new BadRequestError('Upload has no "file" part');
  if (!file.verdict.clean) return blocked(file, fileName, folder);
  return { folder: folder ?? '/', name: fileName, size: file.size, sha256: file.sha256, mimeType: file.mimeType, pending: file.pending! };

  async function blocked(result: FileResult, name: string, where: string | undefined): Promise<BlockedUpload> {
    await result.pending?.discard().catch((e: unknown) => app.log.warn({ err: e }, 'could not discard a blocked upload'));
    const signature = result.verdict.clean ? '' : result.verdict.signature;
    return { blocked: true, folder: where ?? '/', name, size: result.size, sha256: result.sha256, signature };
  }
}

import { createHash } from 'node:crypto';
import { pack, type Header, type Pack } from 'tar-stream';
import { reasonOf } from '../copy/errors.js';
import { truncate } from '../copy/stats.js';

/**
 * The tar stream of a relay (shared/src/protocol/relay-protocol.ts, "The tar stream"): for each
 * wanted file, in want order, a content entry of the size the want gave (pax `xfer.kind=file`),
 * then a zero-size trailer of the same name (pax `xfer.kind=sum` and `xfer.sha256` of the bytes
 * read, or `xfer.error` when the read failed or found another size: the content was cut or
 * zero-padded to its declared size and is to be discarded). A file that could not be opened at
 * all gets the trailer alone.
 */

/**
 * Files up to this size are read whole into memory on both sides: the source reads them ahead,
 * the destination takes them off the tar stream so that the next entry can start while they are
 * written (the tar stream is sequential, the write side concurrent). Larger ones stream.
 */
export const SMALL_FILE_BYTES = 1024 * 1024;

const KIND = 'xfer.kind';
const SHA256 = 'xfer.sha256';
const ERROR = 'xfer.error';
/** Longest `xfer.error` sent: a reason, not a log. */
const MAX_ERROR_CHARS = 2000;
/** Zeros a cut-short content entry is padded with, a slice at a time. */
const ZEROS = Buffer.alloc(64 * 1024);

/** One entry being written into the pack (a streamx Writable). */
type Sink = ReturnType<Pack['entry']>;

/** A relay's tar stream broke the contract (an entry out of order, of the wrong size or kind): the relay is over. */
export class RelayBreach extends Error {
  override readonly name = 'RelayBreach';
}

/** One entry of a relay's tar stream, as the destination reads it. */
export type RelayTarEntry =
  | { kind: 'file'; path: string; size: number }
  | { kind: 'sum'; path: string; sha256: string }
  | { kind: 'sum'; path: string; error: string };

/** How one file's read ended, as its trailer says. */
export type ReadResult = { sha256: string } | { error: string };

/** The header of a file's content entry. */
export function contentHeader(path: string, size: number): Header {
  return header(path, size, { [KIND]: 'file' });
}

/** The header of a file's trailer. */
export function trailerHeader(path: string, result: ReadResult): Header {
  return header(path, 0, 'sha256' in result ? { [KIND]: 'sum', [SHA256]: result.sha256 } : { [KIND]: 'sum', [ERROR]: truncate(result.error, MAX_ERROR_CHARS) });
}

/** tar-stream only reads it. */
const EPOCH = new Date(0);

/** A new header (tar-stream's pack fills in a header it is given): two a file, so built in one literal. */
function header(path: string, size: number, pax: Record<string, string>): Header {
  // Nothing but the name and size means anything here: fixed mode, owner and time.
  return { name: path, size, type: 'file', mode: 0o644, mtime: EPOCH, linkname: '', uid: 0, gid: 0, uname: '', gname: '', devmajor: 0, devminor: 0, pax };
}

/** What an extracted header says; RelayBreach when it is not an entry of the contract. */
export function readEntryHeader(header: Header): RelayTarEntry {
  const pax = (header.pax ?? {}) as Record<string, string | undefined>;
  if (header.type !== 'file') throw new RelayBreach(`the relay's tar stream holds a ${header.type} entry`);
  const kind = pax[KIND];
  if (kind === 'file') return { kind: 'file', path: header.name, size: header.size };
  if (kind !== 'sum') throw new RelayBreach(`the relay's tar entry ${JSON.stringify(header.name)} has no xfer.kind of the contract`);
  if (header.size !== 0) throw new RelayBreach(`the relay's trailer of ${JSON.stringify(header.name)} is not empty`);
  const sha256 = pax[SHA256];
  if (sha256 !== undefined) {
    if (!/^[0-9a-f]{64}$/.test(sha256)) throw new RelayBreach(`the relay's trailer of ${JSON.stringify(header.name)} has a malformed xfer.sha256`);
    return { kind: 'sum', path: header.name, sha256 };
  }
  return { kind: 'sum', path: header.name, error: pax[ERROR] || 'the source could not read the file' };
}

/**
 * The source side's tar writer: packs wanted files one after the other into `output` (a
 * tar-stream pack, read by whoever sends the frames). Writing waits whenever `output` holds more
 * than its high-water mark, so it holds about one chunk whatever the file sizes.
 */
export class RelayTarWriter {
  readonly output: Pack;

  /** `highWaterMark`: bytes `output` holds before writing waits (a frame's worth lets the sender fill whole frames). */
  constructor(options: { highWaterMark?: number } = {}) {
    this.output = pack(options);
    // A failing entry destroys the pack with its error: that reaches the entry's writer (and the
    // sender sees the output close); as an 'error' event with no listener it would throw.
    this.output.on('error', () => {});
  }

  /**
   * Packs one file: its content entry of exactly `size` bytes from `body` (cut, or padded with
   * zeros, when the body gives another number of bytes or fails), then its trailer with the
   * SHA-256 of the bytes read, or the reason they are not the file. `body` null: the file could
   * not be opened (`openError`), the trailer alone goes. Rejects only when the writer was
   * destroyed or `signal` aborted; a failing body is the trailer's business. Resolves with how
   * the read ended.
   */
  async file(path: string, size: number, body: AsyncIterable<Uint8Array> | Iterable<Uint8Array> | null, signal: AbortSignal, openError = 'the source could not open the file'): Promise<ReadResult> {
    if (body === null) {
      const result = { error: openError };
      await this.entry(trailerHeader(path, result), async () => {});
      return result;
    }
    const hash = createHash('sha256');
    let read = 0;
    let failure: string | null = null;
    await this.entry(contentHeader(path, size), async (sink) => {
      try {
        for await (const chunk of body) {
          signal.throwIfAborted();
          const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
          if (read + bytes.length > size) {
            failure = `source changed during copy: listed ${size} bytes, read more`;
            await write(sink, bytes.subarray(0, size - read));
            read = size;
            break;
          }
          hash.update(bytes);
          read += bytes.length;
          await write(sink, bytes);
        }
        if (failure === null && read < size) failure = `source changed during copy: listed ${size} bytes, read ${read}`;
      } catch (err) {
        signal.throwIfAborted();
        failure = reasonOf(err);
      }
      for (let padded = read; padded < size; padded += ZEROS.length) await write(sink, ZEROS.subarray(0, Math.min(ZEROS.length, size - padded)));
    });
    const result: ReadResult = failure === null ? { sha256: hash.digest('hex') } : { error: failure };
    await this.entry(trailerHeader(path, result), async () => {});
    return result;
  }

  /** Stops packing: pending writes reject, `output` ends with `err`. */
  destroy(err?: Error): void {
    this.output.destroy(err);
  }

  /** One entry, its body written by `fill`; resolves once tar-stream took it whole. */
  private entry(header: Header, fill: (sink: Sink) => Promise<void>): Promise<void> {
    if (this.output.destroying) return Promise.reject(new Error('the relay tar writer was destroyed'));
    return new Promise<void>((resolve, reject) => {
      const sink = this.output.entry(header, (err) => (err ? reject(err) : resolve()));
      // Its error is the callback's (above); unlistened, streamx would throw it.
      sink.on('error', () => {});
      fill(sink).then(() => sink.end(null), (err: unknown) => sink.destroy(err as Error));
    });
  }
}

/** Writes `chunk` into a tar entry, waiting while the pack is backed up. */
async function write(sink: Sink, chunk: Buffer): Promise<void> {
  if (chunk.length === 0) return;
  if (sink.write(chunk)) return;
  await new Promise<void>((resolve, reject) => {
    const drained = () => { sink.off('close', closed); resolve(); };
    const closed = () => { sink.off('drain', drained); reject(new Error('the relay tar writer was destroyed')); };
    sink.once('drain', drained);
    sink.once('close', closed);
  });
}

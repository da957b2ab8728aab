import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ConnectorError } from '../types.js';
import type { DriveItem, GraphClient } from './onedrive.graph.js';
import type { BodySource } from './onedrive.http.js';
import { QuickXorHash } from './quickxorhash.js';

/** The documented limit of a simple upload (PUT .../content); anything longer goes through an upload session. */
export const SIMPLE_UPLOAD_MAX_BYTES = 4 * 1024 * 1024;
/** Upload session fragments must be multiples of 320 KiB (Graph "Upload large files with an upload session"). */
export const FRAGMENT_UNIT_BYTES = 320 * 1024;
/** 32 × 320 KiB = 10 MiB per fragment: well under the 60 MiB per request Graph accepts, few round trips. */
export const FRAGMENT_BYTES = 32 * FRAGMENT_UNIT_BYTES;

export interface UploadTarget {
  /** `.../root:/a/b.txt:` (the item's path-addressed URL path). */
  itemUrl: string;
  rel: string;
  signal?: AbortSignal;
  /** Where a body of unknown length above the simple-upload limit is spooled to learn its length. */
  tmpDir: string;
}

export interface Uploaded {
  item: DriveItem;
  size: number;
  /** QuickXorHash (base64) of the bytes sent. */
  quickXorHash: string;
}

/**
 * Reads a source in pieces of a given length, hashing every byte it hands out. The source's
 * chunks are kept as they came (no copy into one buffer) until a piece is complete.
 */
class SourceReader {
  private readonly iterator: AsyncIterator<unknown>;
  private left: Buffer | null = null;
  ended = false;
  consumed = 0;
  readonly hash = new QuickXorHash();
  /** Set when the source itself failed (not the upload), to tell the two apart in messages. */
  sourceError: unknown;

  constructor(body: Readable) {
    this.iterator = body[Symbol.asyncIterator]();
  }

  /** Up to `n` bytes (fewer only at the end of the source). */
  async read(n: number): Promise<Buffer[]> {
    const out: Buffer[] = [];
    let have = 0;
    while (have < n) {
      let chunk = this.left;
      this.left = null;
      if (!chunk) {
        if (this.ended) break;
        chunk = await this.pull();
        if (!chunk) break;
        if (chunk.length === 0) continue;
      }
      if (chunk.length > n - have) {
        this.left = chunk.subarray(n - have);
        chunk = chunk.subarray(0, n - have);
      }
      out.push(chunk);
      have += chunk.length;
      this.hash.update(chunk);
      this.consumed += chunk.length;
    }
    return out;
  }

  /** True when nothing more will come (reads ahead one chunk if needed). */
  async atEnd(): Promise<boolean> {
    while (!this.left && !this.ended) {
      const chunk = await this.pull();
      if (chunk && chunk.length > 0) this.left = chunk;
    }
    return !this.left;
  }

  /** The source's next chunk, or null at its end; a failure of the source is remembered as the source's. */
  private async pull(): Promise<Buffer | null> {
    let next: IteratorResult<unknown>;
    try {
      next = await this.iterator.next();
    } catch (err) {
      this.sourceError = err;
      throw err;
    }
    if (next.done) {
      this.ended = true;
      return null;
    }
    return typeof next.value === 'string' ? Buffer.from(next.value) : (next.value as Buffer);
  }
}

const bytesOf = (chunks: Buffer[]) => chunks.reduce((n, c) => n + c.length, 0);
const fromChunks = (chunks: Buffer[]): BodySource => ({ length: bytesOf(chunks), open: () => Readable.from(chunks) });

/**
 * Writes `body` to the target with `conflictBehavior=replace`. Up to 4 MiB: one simple upload
 * (the whole body in memory, at most 4 MiB). Longer: an upload session, fragments of 10 MiB
 * (a multiple of 320 KiB) sent one after the other with Content-Range; each fragment is held
 * (as the source's chunks) until Graph accepted it, so a throttled fragment is sent again. Graph
 * needs the total length in every Content-Range (an unknown length `*` is refused), so a body
 * longer than 4 MiB without a size hint is first spooled to a temporary file — on disk, never
 * in memory — and its fragments are read from there. A failed or aborted session is deleted.
 */
export async function upload(graph: GraphClient, body: Readable, target: UploadTarget, size: number | undefined): Promise<Uploaded> {
  const source = new SourceReader(body);
  // A source that stalls leaves a read pending forever: an abort destroys it, which ends the read.
  const onAbort = () => body.destroy(target.signal?.reason instanceof Error ? target.signal.reason : new Error('aborted'));
  target.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    if (size !== undefined && size > SIMPLE_UPLOAD_MAX_BYTES) return await session(graph, target, size, streamedFragments(source, size, target.rel), source);
    const head = await source.read(SIMPLE_UPLOAD_MAX_BYTES);
    if (await source.atEnd()) return await simple(graph, target, head, source);
    if (size !== undefined) throw new ConnectorError('TRANSIENT', `write ${JSON.stringify(target.rel)}: the source delivered more than the ${size} bytes announced`);
    const spool = join(target.tmpDir, `xfer-onedrive-${randomBytes(8).toString('hex')}.part`);
    try {
      await pipeline(Readable.from(spooled(head, source)), createWriteStream(spool, { mode: 0o600 }), { signal: target.signal });
      return await session(graph, target, source.consumed, fileFragments(spool, source.consumed), source);
    } finally {
      await rm(spool, { force: true });
    }
  } catch (err) {
    if (err instanceof ConnectorError || target.signal?.aborted) throw err;
    // Not Graph's answer: the source failed, or the spool file could not be written or read.
    const what = source.sourceError !== undefined ? 'reading the source failed' : `spooling the body to ${target.tmpDir} failed`;
    throw new ConnectorError('TRANSIENT', `write ${JSON.stringify(target.rel)}: ${what}: ${(err as Error)?.message ?? err}`, { cause: err });
  } finally {
    target.signal?.removeEventListener('abort', onAbort);
  }
}

async function* spooled(head: Buffer[], source: SourceReader): AsyncIterable<Buffer> {
  yield* head;
  for (;;) {
    const chunks = await source.read(FRAGMENT_BYTES);
    if (chunks.length === 0) return;
    yield* chunks;
  }
}

async function simple(graph: GraphClient, target: UploadTarget, chunks: Buffer[], source: SourceReader): Promise<Uploaded> {
  const item = await graph.json<DriveItem>({
    method: 'PUT', url: `${target.itemUrl}/content?@microsoft.graph.conflictBehavior=replace`, body: Buffer.concat(chunks),
    headers: { 'Content-Type': 'application/octet-stream' }, signal: target.signal, ctx: { op: 'write', path: target.rel },
  });
  return { item, size: source.consumed, quickXorHash: source.hash.digestBase64() };
}

/** One fragment of an upload session: where it starts and its bytes (re-openable for a retry). */
interface Fragment {
  offset: number;
  body: BodySource;
}

/**
 * Fragments read from the source as they are sent, checked against the announced size before
 * each is sent: the last fragment commits the file, so a source that turns out shorter or longer
 * must fail before it.
 */
async function* streamedFragments(source: SourceReader, size: number, rel: string): AsyncIterable<Fragment> {
  for (let offset = 0; offset < size;) {
    const want = Math.min(FRAGMENT_BYTES, size - offset);
    const chunks = await source.read(want);
    const length = bytesOf(chunks);
    if (length < want) throw new ConnectorError('TRANSIENT', `write ${JSON.stringify(rel)}: the source delivered ${offset + length} bytes, not the ${size} announced`);
    if (offset + length === size && !(await source.atEnd())) {
      throw new ConnectorError('TRANSIENT', `write ${JSON.stringify(rel)}: the source delivered more than the ${size} bytes announced`);
    }
    yield { offset, body: fromChunks(chunks) };
    offset += length;
  }
}

/** Fragments of a spooled file, each opened from disk when sent. */
async function* fileFragments(path: string, size: number): AsyncIterable<Fragment> {
  for (let offset = 0; offset < size; offset += FRAGMENT_BYTES) {
    const length = Math.min(FRAGMENT_BYTES, size - offset);
    const start = offset;
    yield { offset, body: { length, open: () => createReadStream(path, { start, end: start + length - 1 }) } };
  }
}

async function session(graph: GraphClient, target: UploadTarget, size: number, fragments: AsyncIterable<Fragment>, source: SourceReader): Promise<Uploaded> {
  const ctx = { op: 'write', path: target.rel };
  const created = await graph.json<{ uploadUrl?: string }>({
    method: 'POST', url: `${target.itemUrl}/createUploadSession`, signal: target.signal, ctx,
    body: JSON.stringify({ item: { '@microsoft.graph.conflictBehavior': 'replace' } }), headers: { 'Content-Type': 'application/json' },
  });
  const uploadUrl = created.uploadUrl;
  if (typeof uploadUrl !== 'string') throw new ConnectorError('TRANSIENT', `write ${JSON.stringify(target.rel)} on ${graph.config.endpoint}: createUploadSession answered without an uploadUrl`);
  let item: DriveItem | undefined;
  try {
    for await (const fragment of fragments) {
      const last = fragment.offset + fragment.body.length - 1;
      const res = await graph.request({
        method: 'PUT', url: uploadUrl, auth: false, body: fragment.body, signal: target.signal, ctx,
        headers: { 'Content-Range': `bytes ${fragment.offset}-${last}/${size}` },
      });
      if (res.status === 202) res.discard();
      else item = JSON.parse(await res.text()) as DriveItem;
    }
    if (!item) throw new ConnectorError('TRANSIENT', `write ${JSON.stringify(target.rel)}: the upload session did not complete after the last fragment`);
  } catch (err) {
    // Nothing of a failed session may stay: DELETE on the uploadUrl cancels it (without the
    // caller's signal, which may be why we are here). Best effort: the session expires anyway.
    await graph.request({ method: 'DELETE', url: uploadUrl, auth: false, ctx, accept: [404] }).then((r) => r.discard(), () => undefined);
    throw err;
  }
  return { item, size, quickXorHash: source.hash.digestBase64() };
}

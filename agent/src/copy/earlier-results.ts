import type { VerifiedFile } from '@xfer/shared';
import type { Logger } from 'pino';
import { reasonOf } from './errors.js';
import type { SourceItem } from './types.js';

/** Asks which of these paths an earlier attempt of the job verified (jobs/verified-lookup.ts in the agent). */
export type AskVerified = (paths: string[], signal: AbortSignal) => Promise<VerifiedFile[]>;

/** Batch bounds of `withEarlierResults` (defaults: 500 items, 512 KiB of paths, 50 ms). */
export interface EarlierResultsOptions {
  /** Items per query, at most (the protocol allows 1000). */
  maxItems?: number;
  /** UTF-8 bytes of the paths of one query, at most (the protocol allows MAX_VERIFIED_QUERY_BYTES). */
  maxBytes?: number;
  /** How long a batch waits for more listed items once it has one. */
  lingerMs?: number;
  log?: Logger;
}

const TIMED_OUT = Symbol('timed out');

/**
 * The listing of a resume run, each file with what an earlier attempt recorded for it
 * (`SourceItem.earlier`, absent when nothing was verified). Items are taken from the listing in
 * batches (up to `maxItems`, or what arrived within `lingerMs` of the first), one query per batch,
 * and handed on in listing order: at most one batch is held, whatever the number of files, and
 * nothing of the job's history is loaded beyond the paths being listed. When a query fails (no
 * answer in time, an older control plane, a lost session) the rest of the run goes without: every
 * file then follows the overwrite policy alone, which never skips what it should copy.
 */
export async function* withEarlierResults(items: AsyncIterable<SourceItem>, ask: AskVerified, signal: AbortSignal, o: EarlierResultsOptions = {}): AsyncGenerator<SourceItem> {
  const it = items[Symbol.asyncIterator]();
  const listing: Listing = { it, next: null };
  let usable = true;
  try {
    for (;;) {
      const { batch, done } = await takeBatch(listing, o.maxItems ?? 500, o.maxBytes ?? 512 * 1024, o.lingerMs ?? 50);
      const files = batch.filter((item) => item.entry.kind === 'file');
      if (usable && files.length > 0 && !signal.aborted) {
        try {
          const found = new Map((await ask(files.map((f) => f.path), signal)).map((v) => [v.path, v]));
          for (let i = 0; i < batch.length; i++) {
            const item = batch[i]!;
            const earlier = item.entry.kind === 'file' ? found.get(item.path) : undefined;
            if (earlier) batch[i] = { ...item, earlier };
          }
        } catch (err) {
          usable = false;
          if (!signal.aborted) o.log?.warn({ err: reasonOf(err) }, 'the results of earlier attempts are not available: every file follows the overwrite policy');
        }
      }
      yield* batch;
      if (done) return;
    }
  } finally {
    // The consumer stopped early (a cancel, a failure): the listing stops too. Not awaited while
    // a page is still being read (its return waits behind that read).
    if (listing.next) it.return?.(undefined)?.catch(() => undefined);
    else await it.return?.(undefined);
  }
}

interface Listing {
  it: AsyncIterator<SourceItem>;
  /** A `next()` asked for and not taken yet (the batch closed while it was pending). */
  next: Promise<IteratorResult<SourceItem>> | null;
}

/** The next batch: up to `maxItems` (or `maxBytes` of file paths), or what arrived within `lingerMs` of its first item. */
async function takeBatch(listing: Listing, maxItems: number, maxBytes: number, lingerMs: number): Promise<{ batch: SourceItem[]; done: boolean }> {
  const batch: SourceItem[] = [];
  let bytes = 0;
  let deadline = 0;
  while (batch.length < maxItems && bytes < maxBytes) {
    listing.next ??= listing.it.next();
    const got = batch.length === 0 ? await listing.next : await within(listing.next, deadline - Date.now());
    if (got === TIMED_OUT) break;
    listing.next = null;
    if (got.done) return { batch, done: true };
    if (batch.length === 0) deadline = Date.now() + lingerMs;
    batch.push(got.value);
    if (got.value.entry.kind === 'file') bytes += Buffer.byteLength(got.value.path);
  }
  return { batch, done: false };
}

/** `promise`, or TIMED_OUT after `ms` (the promise stays pending for the next call). */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  if (ms <= 0) return TIMED_OUT;
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<typeof TIMED_OUT>((resolve) => { timer = setTimeout(() => resolve(TIMED_OUT), ms); })]);
  } finally {
    clearTimeout(timer);
  }
}

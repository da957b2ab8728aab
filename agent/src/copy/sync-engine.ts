import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import PQueue from 'p-queue';
import { compileFilters, hasFilters, type FileFilter, type FilterOptions, type JobOptions, type MaxDelete, type PlanItem, type PlanSummary, type VerifiedFile } from '@xfer/shared';
import type { Logger } from 'pino';
import { baseName, joinRel, relativePath } from '../connectors/paths.js';
import type { Connector, Entry } from '../connectors/types.js';
import { readAhead } from '../lib/read-ahead.js';
import { SOFT_CUTOFF_ERROR } from './copy-engine.js';
import { DeletionList } from './deletion-list.js';
import { decide, isSameReason, isUnchangedReason, mergeListings, modifyWindowMs, planSide, sameAsPlanned, sha256Of, withKeptTime, type DecideContext, type Decision, type Pair } from './diff.js';
import { withEarlierResults } from './earlier-results.js';
import { CopyJobError, reasonOf } from './errors.js';
import { sweepTemporaries } from './leftovers.js';
import { orderedListing, type ListedEntry } from './ordered-listing.js';
import { readAt } from './read-side.js';
import { stillVerified } from './plan.js';
import { CopyStats, truncate } from './stats.js';
import { DEFAULT_TUNING, type CopyOutcome, type CopyRequest, type SourceItem } from './types.js';
import { WriteSide } from './write-side.js';

const MAX_ERROR_CHARS = 4000;

/**
 * Whether a run compares listings (this module) rather than copying lazily (copy-engine.ts): a
 * `sync` or `move`, filters, an explicit `compare`. A plain copy keeps the lazy path: no
 * destination listing, no ordering, a stat per file.
 */
export function comparesListings(options: JobOptions): boolean {
  return (options.mode ?? 'copy') !== 'copy' || options.compare !== undefined || hasFilters(options.filters);
}

/** The source's entries as items, in key order, filtered (directories the filter excludes are never listed). */
export async function* orderedSourceItems(source: Connector, sourcePath: string, filter: FileFilter, signal: AbortSignal): AsyncGenerator<SourceItem> {
  const root = relativePath(sourcePath);
  for await (const listed of orderedListing({ connector: source, root: sourcePath, filter, signal, missing: 'fail' })) {
    // A file root is listed as its base name; it is read at the root itself.
    const at = listed.entry.path === root && listed.entry.kind === 'file' ? root : joinRel(root, listed.path);
    yield { path: listed.path, entry: listed.entry, ...readAt(source, at) };
  }
}

/** A plan being applied (`job.assign.plan_id`): its items in path order. */
export type PlanItems = AsyncIterable<PlanItem>;

/** The limit `max_delete` sets on a run that would delete `count` of `inScope` destination files; null: within it. */
export function deleteRefusal(maxDelete: MaxDelete | undefined, count: number, inScope: number): string | null {
  if (maxDelete === undefined || count === 0) return null;
  const limit = typeof maxDelete === 'number' ? maxDelete : Math.floor((Number.parseFloat(maxDelete) / 100) * inScope);
  if (count <= limit) return null;
  return `max_delete ${typeof maxDelete === 'number' ? maxDelete : `${maxDelete} (${limit} of ${inScope} files)`} exceeded: ${count} destination files are not in the source; nothing was deleted`;
}

/** The two listings of a run or a plan: the source's (from a connector or a relay) and the destination's. */
export interface Sides {
  sourceItems: AsyncIterable<SourceItem>;
  destinationEntries: AsyncIterable<ListedEntry>;
  /** A single-file source: nothing else at the destination is the run's business (no deletion). */
  singleFile: boolean;
}

/** Listing entries each side fetches ahead of the comparison (lib/read-ahead.ts): both sides' requests overlap. */
const LISTING_READ_AHEAD = 1000;

function sidesOf(request: CopyRequest, filter: FileFilter, signal: AbortSignal, sourceTop: Entry | null): Sides {
  const destinationEntries = (sourceIsFile: boolean, name: string): AsyncIterable<ListedEntry> => sourceIsFile
    ? oneDestination(request.destination, joinRel(relativePath(request.destinationPath), name), name, signal)
    : readAhead(orderedListing({ connector: request.destination, root: request.destinationPath, filter, signal, missing: 'empty' }), LISTING_READ_AHEAD);
  if (request.items) return { sourceItems: request.items, destinationEntries: destinationEntries(false, ''), singleFile: false };
  const singleFile = sourceTop?.kind === 'file';
  return {
    sourceItems: readAhead(orderedSourceItems(request.source, request.sourcePath, filter, signal), LISTING_READ_AHEAD),
    destinationEntries: destinationEntries(singleFile, baseName(relativePath(request.sourcePath))),
    singleFile,
  };
}

async function* oneDestination(destination: Connector, path: string, name: string, signal: AbortSignal): AsyncGenerator<ListedEntry> {
  const found = await destination.stat(path, { signal });
  if (found?.kind === 'file') yield { path: name, key: name, entry: found };
}

/** Whether the source path is a file (its one item is named by its base name, and read at the path itself); set once it was stat'ed. */
interface SourceRoot {
  file: boolean;
}

/** Where the item `path` of the run is on the source connector. */
function sourceAt(request: CopyRequest, root: SourceRoot, path: string): string {
  const srcRoot = relativePath(request.sourcePath ?? '');
  return root.file ? srcRoot : joinRel(srcRoot, path);
}

function contextOf(request: CopyRequest, signal: AbortSignal, root: SourceRoot): DecideContext {
  const dstRoot = relativePath(request.destinationPath);
  const hash = (c: Connector, at: string, s: AbortSignal) => c.read(at, { signal: s }).then((body) => sha256Of(body as AsyncIterable<Buffer>));
  const source = request.source;
  return {
    options: request.options, signal,
    destinationModTime: request.destination.capabilities.modTime ?? 'none',
    // Through a relay the source's precision is the other agent's to know: 1 s, the coarsest kept.
    modifyWindowMs: modifyWindowMs(source?.capabilities.modTimePrecision, request.destination.capabilities.modTimePrecision),
    statSource: source ? (p, s) => source.stat(sourceAt(request, root, p), { signal: s }) : () => Promise.resolve(null),
    statDestination: (p, s) => request.destination.stat(joinRel(dstRoot, p), { signal: s }),
    // Through a relay the source's bytes are the relay's: its hash is not read twice (relayed checksum compares copy).
    hashSource: source ? (p, s) => hash(source, sourceAt(request, root, p), s) : () => Promise.reject(new CopyJobError('no source hash through a relay')),
    hashDestination: (p, s) => hash(request.destination, joinRel(dstRoot, p), s),
  };
}

/**
 * A run that compares listings (docs/agent.md "Sync, move and plans"): `copy` with filters or a
 * `compare`, `sync`, `move`; or the apply of a plan (`plan`).
 *
 * Both trees are listed in path order (ordered-listing.ts) and merge-joined (diff.ts) as they
 * come; each path is decided and acted on by at most `concurrency` workers, the listing waiting
 * for room (the same back-pressure as copy-engine.ts), each copy through the write side's
 * temporary name, verification and retries. Memory holds one directory per depth per side, the
 * files in flight, and the `sync` deletions (deletion-list.ts).
 *
 * Deletion safety (`sync`): deletions are only collected while comparing; once every copy of the
 * run is verified, with no file failed, no listing error, no cancel and no cutoff, and within
 * `max_delete`, they are carried out, then the destination directories the source lacks are
 * removed once empty. `move` deletes each source file once its copy is verified (or once found
 * identical at the destination).
 */
export async function syncTree(request: CopyRequest, log?: Logger, plan?: PlanItems): Promise<CopyOutcome> {
  const { signal, options } = request;
  const mode = options.mode ?? 'copy';
  const tuning = { ...DEFAULT_TUNING, ...request.tuning };
  const stats = new CopyStats(request.observer);
  const writer = new WriteSide({
    destination: request.destination, destinationPath: request.destinationPath, options,
    run: request.run, signal, stats, tuning, log, limits: request.limits,
  });
  const dstRoot = relativePath(request.destinationPath);
  const srcRoot = request.source ? relativePath(request.sourcePath) : '';
  const deletions = new DeletionList();
  /** Destination directories the source lacks (`sync`): removed, deepest first, once empty. */
  const strayDirectories: string[] = [];
  let destinationFilesInScope = 0;
  const root: SourceRoot = { file: false };
  let jobError: string | null = null;
  let cutoff = false;
  const queue = new PQueue({ concurrency: options.concurrency });
  const swept = sweepTemporaries(request.destination, dstRoot, request.run, signal, log);
  const prepared = writer.prepare();
  prepared.catch(() => undefined);
  const ctx = contextOf(request, signal, root);

  const moveSource = async (item: { path: string; entry: Entry }): Promise<void> => {
    if (!request.source) return;
    const at = sourceAt(request, root, item.path);
    try {
      await writer.removeWithRetries(request.source, at, item.path);
      stats.fileDone({ path: item.path, status: 'deleted', size: item.entry.size, reason: 'moved: its copy is verified' });
    } catch (err) {
      if (!signal.aborted) stats.fileDone({ path: item.path, status: 'failed', size: item.entry.size, error: `copied, but the source could not be deleted: ${truncate(reasonOf(err), 1500)}` });
    }
  };

  /** Acts on one decided file: copy, skip, or collect a deletion. */
  const act = async (item: Pair, decision: Decision): Promise<void> => {
    if (decision.action === 'delete') {
      if (mode === 'sync') deletions.add({ path: item.path, size: item.destination!.size });
      return;
    }
    if (decision.action === 'skip') {
      if (decision.unchanged) stats.fileUnchanged();
      else stats.fileDone({ path: item.path, status: 'skipped', size: item.entry.size, reason: decision.reason });
      if (mode === 'move' && decision.same) await moveSource(item);
      return;
    }
    // A soft cutoff that passed while this file waited in the queue: it does not start.
    if (!(request.limits?.mayStart() ?? true)) {
      cutoff = true;
      return;
    }
    // The destination keeps the source's time: the one its store keeps, so the next comparison finds them equal.
    const source = request.source ? await withKeptTime(item, () => ctx.statSource(item.path, signal)) : item;
    const result = await writer.copyDecided(source);
    if (!result) return;
    stats.fileDone(decision.action === 'update' && result.status === 'copied' ? { ...result, reason: decision.reason } : result);
    if (mode === 'move' && result.status === 'copied') await moveSource(item);
  };

  try {
    if (plan) {
      if (!request.source) throw new CopyJobError('a plan is applied with the source connector itself, not through a relay');
      await prepared;
      root.file = (await request.source.stat(srcRoot, { signal }))?.kind === 'file';
      for await (const { item, earlier } of plannedItems(plan, request, log)) {
        if (signal.aborted) break;
        if (item.action === 'delete' || item.destination) destinationFilesInScope++;
        if (item.action === 'delete') {
          // Checked now (the same rule as the rest: unchanged since the plan), deleted at the end.
          const now = await ctx.statDestination(item.path, signal);
          // Gone already (a retry of an apply whose deletions ran): nothing left to do.
          if (now === null) stats.fileDone({ path: item.path, status: 'skipped', size: item.destination?.size ?? 0, reason: 'already gone' });
          else if (!sameAsPlanned(item.destination, now)) stats.fileDone({ path: item.path, status: 'skipped', size: now.size, reason: 'changed since plan' });
          else if (mode === 'sync') deletions.add({ path: item.path, size: item.destination!.size });
          continue;
        }
        stats.fileListed();
        if (item.action !== 'skip' && !(request.limits?.mayStart() ?? true)) {
          cutoff = true;
          break;
        }
        await queue.onSizeLessThan(options.concurrency);
        if (signal.aborted) break;
        void queue.add(() => applyItem(item, earlier));
      }
    } else {
      const top = request.source ? await request.source.stat(srcRoot, { signal }) : null;
      if (request.source && !top) throw new CopyJobError(`source path ${request.sourcePath} does not exist`);
      const filter = compileFilters(options.filters, new Date());
      const sides = sidesOf(request, filter, signal, top);
      root.file = sides.singleFile;
      let pairs: AsyncIterable<Pair> = mergeListings(sides.sourceItems, sides.destinationEntries);
      if (request.resume && request.askVerified) pairs = withEarlierResults(pairs as AsyncIterable<SourceItem>, request.askVerified, signal, { log }) as AsyncIterable<Pair>;
      for await (const item of pairs) {
        await prepared;
        if (signal.aborted) break;
        if (item.entry.kind === 'directory') {
          if (!item.source && mode === 'sync') strayDirectories.push(item.path);
          else if (item.source && !item.destination) await writer.consume(item);
          continue;
        }
        if (item.destination) destinationFilesInScope++;
        if (!item.source) {
          if (mode === 'sync') deletions.add({ path: item.path, size: item.destination!.size });
          continue;
        }
        stats.fileListed();
        if (!(request.limits?.mayStart() ?? true)) {
          cutoff = true;
          break;
        }
        // Back-pressure on both listings: take the next path only when the queue has room.
        await queue.onSizeLessThan(options.concurrency);
        if (signal.aborted) break;
        void queue.add(async () => {
          let decision: Decision;
          try {
            decision = await decide(item, item.earlier, ctx);
          } catch (err) {
            if (signal.aborted) return;
            // A stat or hash that failed: the file is copied (a comparison never skips on doubt).
            log?.info({ file: item.path, err: reasonOf(err) }, 'comparison failed: copying');
            decision = { action: 'update', reason: 'comparison failed' };
          }
          await act(item, decision);
        });
      }
    }
    await prepared;
    if (!signal.aborted && !cutoff) stats.listingDone();
  } catch (err) {
    if (!signal.aborted) {
      jobError = reasonOf(err);
      log?.error({ err: jobError }, 'listing, comparing or preparing failed');
    }
  }
  await queue.onIdle();
  await swept;

  async function applyItem(item: PlanItem, earlier: VerifiedFile | undefined): Promise<void> {
    const [src, dst] = await Promise.all([ctx.statSource(item.path, signal), ctx.statDestination(item.path, signal)]).catch((err: unknown) => {
      if (!signal.aborted) stats.fileDone({ path: item.path, status: 'failed', size: item.source?.size ?? 0, error: truncate(reasonOf(err), 2000) });
      return [undefined, undefined] as const;
    });
    if (src === undefined || signal.aborted) return;
    // A retry of the apply: what an earlier attempt copied no longer looks as the plan saw the destination, but is done.
    if (earlier && src && dst && stillVerified(src, dst, earlier)) {
      const at = sourceAt(request, root, item.path);
      await act({ path: item.path, key: item.path, entry: src, source: src, destination: dst, ...readAt(request.source!, at) },
        { action: 'skip', reason: `verified by attempt ${earlier.attempt}`, same: true });
      return;
    }
    if (!sameAsPlanned(item.source, src) || !sameAsPlanned(item.destination, dst)) {
      stats.fileDone({ path: item.path, status: 'skipped', size: src?.size ?? item.source?.size ?? 0, reason: 'changed since plan' });
      return;
    }
    if (!src) {
      stats.fileDone({ path: item.path, status: 'skipped', size: 0, reason: 'changed since plan' });
      return;
    }
    const entry = src;
    const at = sourceAt(request, root, item.path);
    const pair: Pair = { path: item.path, key: item.path, entry, source: entry, destination: dst ?? undefined, ...readAt(request.source!, at) };
    const skip = item.action === 'skip';
    await act(pair, { action: item.action, reason: item.reason, same: skip && isSameReason(item.reason), unchanged: skip && isUnchangedReason(item.reason) });
  }

  try {
    const counters = () => ({ ...stats.counters });
    if (signal.aborted) return { status: 'cancelled', counters: counters() };
    if (jobError !== null) {
      const files = stats.failureCount > 0 ? `; ${stats.failureMessage()}` : '';
      return { status: 'failed', counters: counters(), error: truncate(`${jobError}${files}${keptNote(deletions.count)}`, MAX_ERROR_CHARS) };
    }
    // The job runner reports the cutoff (jobs/cutoff.ts); no deletion follows an unfinished run.
    if (cutoff) return { status: 'failed', counters: counters(), error: SOFT_CUTOFF_ERROR };
    if (stats.failureCount > 0) return { status: 'failed', counters: counters(), error: truncate(`${stats.failureMessage()}${keptNote(deletions.count)}`, MAX_ERROR_CHARS) };
    if (mode === 'sync' && !root.file) {
      const refused = deleteRefusal(options.max_delete, deletions.count, destinationFilesInScope);
      if (refused) return { status: 'failed', counters: counters(), error: refused };
      await deleteAll(deletions);
      if (signal.aborted) return { status: 'cancelled', counters: counters() };
      if (stats.failureCount > 0) return { status: 'failed', counters: counters(), error: stats.failureMessage() };
      await removeEmptyDirectories();
    }
    return { status: 'completed', counters: counters() };
  } finally {
    await deletions.dispose();
  }

  async function deleteAll(list: DeletionList): Promise<void> {
    const deleting = new PQueue({ concurrency: options.concurrency });
    for await (const d of list) {
      if (signal.aborted) break;
      await deleting.onSizeLessThan(options.concurrency);
      void deleting.add(async () => {
        try {
          await writer.removeWithRetries(request.destination, joinRel(dstRoot, d.path), d.path);
          stats.fileDone({ path: d.path, status: 'deleted', size: d.size, reason: 'not in the source' });
        } catch (err) {
          if (!signal.aborted) stats.fileDone({ path: d.path, status: 'failed', size: d.size, error: `could not delete: ${truncate(reasonOf(err), 1500)}` });
        }
      });
    }
    await deleting.onIdle();
  }

  /** Destination directories the source lacks, deepest first, each only when nothing is left in it (an excluded file keeps it). */
  async function removeEmptyDirectories(): Promise<void> {
    for (const dir of strayDirectories.reverse()) {
      if (signal.aborted) return;
      const at = joinRel(dstRoot, dir);
      try {
        let empty = true;
        for await (const entry of request.destination.list(at, { recursive: false, signal })) {
          void entry;
          empty = false;
          break;
        }
        if (empty) await request.destination.remove(at, { signal });
      } catch (err) {
        log?.warn({ dir, err: reasonOf(err) }, 'could not remove a directory the source lacks');
      }
    }
  }
}

/** A plan's items, each with what an earlier attempt of the job verified of it (a retry of the apply; copy/earlier-results.ts). */
async function* plannedItems(plan: PlanItems, request: CopyRequest, log?: Logger): AsyncGenerator<{ item: PlanItem; earlier?: VerifiedFile }> {
  async function* asItems(): AsyncGenerator<SourceItem & { planned: PlanItem }> {
    for await (const planned of plan) {
      const size = planned.source?.size ?? planned.destination?.size ?? 0;
      yield { path: planned.path, entry: { path: planned.path, kind: 'file', size }, open: () => Promise.reject(new CopyJobError('not read')), planned };
    }
  }
  const items = request.resume && request.askVerified ? withEarlierResults(asItems(), request.askVerified, request.signal, { log }) : asItems();
  for await (const i of items) yield { item: (i as SourceItem & { planned: PlanItem }).planned, ...(i.earlier ? { earlier: i.earlier } : {}) };
}

function keptNote(count: number): string {
  return count > 0 ? `; nothing was deleted (${count} destination ${count === 1 ? 'file' : 'files'} not in the source kept)` : '';
}

/** What a plan saw and would do: the items in path order, the summary and the fingerprint of both listings. */
export interface PlanOutput {
  /** Each item, in path order, as decided. */
  item(item: PlanItem): Promise<void> | void;
}

/**
 * Computes a plan (`plan.assign`): exactly the listing, filtering and comparison of a run of the
 * same options (`syncTree`), with no write. Items go to `out` in path order (decided by up to
 * `concurrency` workers, handed on in order); returns the summary and the fingerprint (hex SHA-256
 * over every entry both listings showed: side, path, kind, size, time, checksum).
 */
export async function computePlan(request: CopyRequest, out: PlanOutput, log?: Logger): Promise<{ summary: PlanSummary; fingerprint: string }> {
  const { signal, options } = request;
  const srcRoot = request.source ? relativePath(request.sourcePath) : '';
  const top = request.source ? await request.source.stat(srcRoot, { signal }) : null;
  if (request.source && !top) throw new CopyJobError(`source path ${request.sourcePath} does not exist`);
  const filter = compileFilters(options.filters, new Date());
  return planOf(sidesOf(request, filter, signal, top), contextOf(request, signal, { file: top?.kind === 'file' }), out, log);
}

/** `computePlan` once both listings are open (the memory test feeds generated ones). */
export async function planOf(sides: Sides, ctx: DecideContext, out: PlanOutput, log?: Logger): Promise<{ summary: PlanSummary; fingerprint: string }> {
  const { signal, options } = ctx;
  const mode = options.mode ?? 'copy';
  const summary: PlanSummary = { copy: 0, update: 0, delete: 0, skip: 0, copy_bytes: 0, update_bytes: 0, delete_bytes: 0 };
  const fingerprint = createHash('sha256');
  let destinationFilesInScope = 0;
  const seen = (side: 'source' | 'destination', l: ListedEntry) => {
    const e = l.entry;
    fingerprint.update(`${side}\u0000${l.key}\u0000${e.size}\u0000${e.modifiedAt?.toISOString() ?? ''}\u0000${e.checksum ? `${e.checksum.algorithm}:${e.checksum.value}` : ''}\n`);
  };
  // Decisions run `concurrency` at once (a stat or a hash each, at most), handed on in order.
  const window: Promise<PlanItem | null>[] = [];
  const emit = async (item: PlanItem | null) => {
    if (!item) return;
    summary[item.action]++;
    if (item.action === 'copy') summary.copy_bytes += item.source!.size;
    if (item.action === 'update') summary.update_bytes += item.source!.size;
    if (item.action === 'delete') summary.delete_bytes += item.destination!.size;
    await out.item(item);
  };
  for await (const pair of mergeListings(sides.sourceItems, sides.destinationEntries, seen)) {
    signal.throwIfAborted();
    if (pair.entry.kind === 'directory') continue;
    if (pair.destination) destinationFilesInScope++;
    if (!pair.source && (mode !== 'sync' || sides.singleFile)) continue;
    window.push(decide(pair, undefined, ctx).catch((err: unknown): Decision => {
      log?.info({ file: pair.path, err: reasonOf(err) }, 'comparison failed: the plan updates the file');
      return { action: 'update', reason: 'comparison failed' };
    }).then((d) => ({
      path: pair.path, action: d.action, reason: d.reason,
      ...(pair.source ? { source: planSide(pair.source) } : {}),
      ...(pair.destination ? { destination: planSide(pair.destination) } : {}),
    })));
    if (window.length >= options.concurrency) await emit(await window.shift()!);
  }
  while (window.length > 0) await emit(await window.shift()!);
  const refused = mode === 'sync' ? deleteRefusal(options.max_delete, summary.delete, destinationFilesInScope) : null;
  if (refused) summary.delete_refused = truncate(refused, 500);
  return { summary, fingerprint: fingerprint.digest('hex') };
}

import { createHash } from 'node:crypto';
import type { CompareMode, JobOptions, PlanAction, PlanSide, VerifiedFile } from '@xfer/shared';
import type { Entry } from '../connectors/types.js';
import { CopyJobError } from './errors.js';
import { compareKeys, keyOf, type ListedEntry } from './ordered-listing.js';
import { stillVerified } from './plan.js';
import type { SourceItem } from './types.js';

/**
 * One path of the merged listings: the source's entry and the destination's, either absent. A
 * SourceItem (so the resume lookup, copy/earlier-results.ts, can batch it) whose `entry` is the
 * source's, or the destination's for a path only the destination has.
 */
export interface Pair extends SourceItem {
  key: string;
  source?: Entry;
  destination?: Entry;
}

/**
 * Merge-joins two listings in key order (ordered-listing.ts) into one stream of pairs, in that
 * order: one entry of each side is held at a time, so memory does not grow with the number of
 * files. The source side's order is checked here too (a relayed listing comes from another
 * agent); the destination's by its walker. `seen` is told every entry of both sides (the plan's
 * fingerprint).
 */
export async function* mergeListings(
  source: AsyncIterable<SourceItem>, destination: AsyncIterable<ListedEntry>, seen?: (side: 'source' | 'destination', listed: ListedEntry) => void,
): AsyncGenerator<Pair> {
  const src = source[Symbol.asyncIterator]();
  const dst = destination[Symbol.asyncIterator]();
  try {
    let previous: string | null = null;
    const nextSource = async (): Promise<(SourceItem & { key: string }) | null> => {
      const r = await src.next();
      if (r.done) return null;
      const key = keyOf(r.value.path, r.value.entry);
      if (previous !== null && compareKeys(previous, key) >= 0) {
        throw new CopyJobError(`the source listed ${JSON.stringify(key)} after ${JSON.stringify(previous)}: not in path order, so it cannot be compared`);
      }
      previous = key;
      seen?.('source', { path: r.value.path, key, entry: r.value.entry });
      return { ...r.value, key };
    };
    const nextDestination = async (): Promise<ListedEntry | null> => {
      const r = await dst.next();
      if (r.done) return null;
      seen?.('destination', r.value);
      return r.value;
    };
    let s = await nextSource();
    let d = await nextDestination();
    while (s || d) {
      const order = !s ? 1 : !d ? -1 : compareKeys(s.key, d.key);
      if (order < 0) {
        yield { ...s!, source: s!.entry };
        s = await nextSource();
      } else if (order > 0) {
        yield { path: d!.path, key: d!.key, entry: d!.entry, destination: d!.entry, open: noSource };
        d = await nextDestination();
      } else {
        yield { ...s!, source: s!.entry, destination: d!.entry };
        s = await nextSource();
        d = await nextDestination();
      }
    }
  } finally {
    await Promise.allSettled([src.return?.(undefined), dst.return?.(undefined)]);
  }
}

function noSource(): Promise<never> {
  return Promise.reject(new CopyJobError('no source file to read'));
}

/** What a run does with one path, and why (`plan.items`, per-file results' `reason`). */
export interface Decision {
  action: PlanAction;
  reason: string;
  /** A skip because both sides hold the same file (a `move` deletes such a source file too). */
  same?: boolean;
  /**
   * A skip because this run's comparison found both sides equal: counted in `files_skipped`, not
   * listed in the per-file results (docs/api.md "Sync, move and plans": a resync of a million
   * unchanged files writes no million rows).
   */
  unchanged?: boolean;
}

/** What deciding may need beyond the two listing entries: a fresh stat (kept times), a hash (checksum). */
export interface DecideContext {
  options: JobOptions;
  /** How the destination keeps modification times (`capabilities.modTime`; absent: `none`). */
  destinationModTime: 'set' | 'metadata' | 'none';
  /**
   * Modification times closer than this are the same (rclone's `--modify-window`, whose default
   * is the coarser precision of the two ends): `modifyWindowMs(source, destination)`.
   */
  modifyWindowMs: number;
  statSource(path: string, signal: AbortSignal): Promise<Entry | null>;
  statDestination(path: string, signal: AbortSignal): Promise<Entry | null>;
  hashSource(path: string, signal: AbortSignal): Promise<string>;
  hashDestination(path: string, signal: AbortSignal): Promise<string>;
  signal: AbortSignal;
}

/**
 * The window within which two modification times are the same: the coarser precision of the two
 * ends (`capabilities.modTimePrecision`, 1 s where unknown, as through a relay), as rclone's
 * default `--modify-window`. Two times 1 ms apart are different between two stores that keep
 * milliseconds, the same between an SFTP server's whole seconds and anything.
 */
export function modifyWindowMs(...precisions: (number | undefined)[]): number {
  return Math.max(1, ...precisions.map((p) => p ?? 1000));
}

/** Reasons of skips where both sides hold the same file (`Decision.same`), as a stored plan carries them. */
export function isSameReason(reason: string): boolean {
  return isUnchangedReason(reason) || reason.startsWith('verified by attempt ');
}

/** Reasons of skips where the comparison found both sides equal (`Decision.unchanged`), as a stored plan carries them. */
export function isUnchangedReason(reason: string): boolean {
  return reason.startsWith('same ');
}

/**
 * Decides one file path (directories are the engine's): `copy` (only the source has it),
 * `delete` (only the destination has it: acted on by `sync` alone), or, with both,
 * per `options.overwrite`: `always` → `update`; `never` → `skip`; `if_changed` → the comparison
 * `options.compare` (default `size_mtime`):
 * - `size`: same size → skip.
 * - `size_mtime`: same size, and modification times equal within `modifyWindowMs` where the destination keeps
 *   them (`set`, `metadata`; an entry marked `modifiedAtNeedsStat` is stat'ed for its kept time,
 *   only when the sizes match), else the destination not older than the source. Unknown times:
 *   update.
 * - `checksum`: same size, and the stores' own checksums equal when both give the same algorithm,
 *   else the SHA-256 of both read.
 * A file an earlier attempt of the job verified and that both sides still match is skipped first
 * (`verified by attempt N`, plan.ts).
 */
export async function decide(pair: Pair, earlier: VerifiedFile | undefined, ctx: DecideContext): Promise<Decision> {
  const { source, destination } = pair;
  if (!source) return { action: 'delete', reason: 'not in the source' };
  if (!destination) return { action: 'copy', reason: 'not at the destination' };
  if (earlier && stillVerified(source, destination, earlier)) return { action: 'skip', reason: `verified by attempt ${earlier.attempt}`, same: true };
  switch (ctx.options.overwrite) {
    case 'always':
      return { action: 'update', reason: 'overwrite always' };
    case 'never':
      return { action: 'skip', reason: 'exists at the destination (overwrite never)' };
    case 'if_changed':
      return compare(pair.path, source, destination, ctx.options.compare ?? 'size_mtime', ctx);
  }
}

async function compare(path: string, source: Entry, destination: Entry, mode: CompareMode, ctx: DecideContext): Promise<Decision> {
  if (source.size !== destination.size) return { action: 'update', reason: 'size differs' };
  if (mode === 'size') return { action: 'skip', reason: 'same size', same: true, unchanged: true };
  if (mode === 'checksum') {
    const a = source.checksum;
    const b = destination.checksum;
    if (a && b && a.algorithm === b.algorithm) {
      return a.value.toLowerCase() === b.value.toLowerCase() ? { action: 'skip', reason: `same ${a.algorithm}`, same: true, unchanged: true } : { action: 'update', reason: `${a.algorithm} differs` };
    }
    const [x, y] = await Promise.all([ctx.hashSource(path, ctx.signal), ctx.hashDestination(path, ctx.signal)]);
    return x === y ? { action: 'skip', reason: 'same sha256', same: true, unchanged: true } : { action: 'update', reason: 'sha256 differs' };
  }
  const [src, dst] = await Promise.all([
    source.modifiedAtNeedsStat ? ctx.statSource(path, ctx.signal) : source,
    destination.modifiedAtNeedsStat ? ctx.statDestination(path, ctx.signal) : destination,
  ]);
  // Gone or changed between listing and stat: copy (a copy checks the source against its listing).
  if (!src || !dst || src.size !== dst.size) return { action: 'update', reason: 'changed while compared' };
  if (!src.modifiedAt || !dst.modifiedAt) return { action: 'update', reason: 'modification time unknown' };
  const delta = dst.modifiedAt.getTime() - src.modifiedAt.getTime();
  if (ctx.destinationModTime !== 'none') {
    return Math.abs(delta) < ctx.modifyWindowMs ? { action: 'skip', reason: 'same size and mtime', same: true, unchanged: true } : { action: 'update', reason: 'modification time differs' };
  }
  return delta >= 0 ? { action: 'skip', reason: 'same size, destination not older', same: true, unchanged: true } : { action: 'update', reason: 'source is newer' };
}

/**
 * The item with the modification time its store keeps where the listing showed another (an S3
 * object's `mtime` metadata, only on a stat: `modifiedAtNeedsStat`), read by `stat`. A stat that
 * fails, or finds the file gone or resized since listed, leaves the listing's entry (the copy
 * checks the source again).
 */
export async function withKeptTime<T extends { entry: Entry }>(item: T, stat: () => Promise<Entry | null>): Promise<T> {
  if (item.entry.kind !== 'file' || !item.entry.modifiedAtNeedsStat) return item;
  const kept = await stat().catch(() => null);
  return kept?.kind === 'file' && kept.size === item.entry.size && kept.modifiedAt
    ? { ...item, entry: { ...item.entry, modifiedAt: kept.modifiedAt, modifiedAtNeedsStat: false } } : item;
}

/** What a plan records of one side (`PlanSide`). */
export function planSide(entry: Entry): PlanSide {
  return {
    size: entry.size,
    // A listing's write time where a stat would show the kept time (S3): not recorded, the apply's stat would differ.
    ...(entry.modifiedAt && !entry.modifiedAtNeedsStat ? { mtime: entry.modifiedAt.toISOString() } : {}),
    ...(entry.checksum ? { checksum: `${entry.checksum.algorithm}:${entry.checksum.value.toLowerCase()}` } : {}),
  };
}

/** Whether `now` (a fresh stat) is still what the plan saw (`recorded`): absent both, or the same size, mtime and checksum where recorded. */
export function sameAsPlanned(recorded: PlanSide | undefined, now: Entry | null): boolean {
  if (!recorded) return now === null || now.kind === 'directory';
  if (!now || now.kind !== 'file' || now.size !== recorded.size) return false;
  const side = planSide(now);
  if (recorded.mtime !== undefined && side.mtime !== undefined && Date.parse(recorded.mtime) !== Date.parse(side.mtime)) return false;
  // Checksums of the same algorithm only (an S3 listing gives the ETag where a HEAD may give the
  // SHA-256): compared on what both have.
  const algorithm = (sum: string): string => sum.slice(0, sum.indexOf(':'));
  if (recorded.checksum !== undefined && side.checksum !== undefined && algorithm(recorded.checksum) === algorithm(side.checksum)
    && recorded.checksum !== side.checksum) return false;
  return true;
}

/** SHA-256 (hex) of a stream's bytes. */
export async function sha256Of(body: AsyncIterable<Buffer>): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of body) hash.update(chunk);
  return hash.digest('hex');
}

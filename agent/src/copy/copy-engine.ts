import PQueue from 'p-queue';
import type { Logger } from 'pino';
import { reasonOf } from './errors.js';
import { sweepTemporaries } from './leftovers.js';
import { relativePath } from '../connectors/paths.js';
import { readSide } from './read-side.js';
import { CopyStats, truncate } from './stats.js';
import { DEFAULT_TUNING, type CopyOutcome, type CopyRequest, type SourceItem } from './types.js';
import { withEarlierResults } from './earlier-results.js';
import { WriteSide } from './write-side.js';
import { comparesListings, syncTree } from './sync-engine.js';

const MAX_ERROR_CHARS = 4000;
/** The error of a run a soft cutoff left unfinished (the job runner reports the cutoff in its place: jobs/cutoff.ts). */
export const SOFT_CUTOFF_ERROR = 'soft cutoff: no new file was started';

/** The source's items; on a resume run, each with what an earlier attempt verified of it (earlier-results.ts). */
function listed(request: CopyRequest, log?: Logger): AsyncIterable<SourceItem> {
  const items = request.items ?? readSide(request.source, request.sourcePath, request.signal);
  if (!request.resume) return items;
  if (!request.askVerified) {
    log?.info('resume run without the results of earlier attempts: every file follows the overwrite policy');
    return items;
  }
  return withEarlierResults(items, request.askVerified, request.signal, { log });
}

/**
 * Copies `sourcePath` (a file or a directory tree) into the directory `destinationPath`; or the
 * request's own `items` (a relay's) in place of a source connector.
 *
 * The listing is consumed lazily: at most `concurrency` items run and at most `concurrency` more
 * wait in the queue, so memory is flat whatever the number of files, and each file streams
 * (memory is flat whatever its size). The job goes on past failing files and fails at the end
 * naming them. Aborting `signal` stops the listing, aborts every stream, removes temporary
 * files, and resolves with `cancelled` once all of that is done.
 *
 * Resolves (never rejects) with the outcome and the final counters.
 */
export async function copyTree(request: CopyRequest, log?: Logger): Promise<CopyOutcome> {
  // sync, move, filters, compare, or a plan: both listings in order, compared (sync-engine.ts).
  if (request.plan || comparesListings(request.options)) return syncTree(request, log, request.plan);
  const { signal, options } = request;
  const tuning = { ...DEFAULT_TUNING, ...request.tuning };
  const stats = new CopyStats(request.observer);
  const writer = new WriteSide({
    destination: request.destination, destinationPath: request.destinationPath, options,
    run: request.run, signal, stats, tuning, log, limits: request.limits,
  });
  // Beside the copy: temporary files of earlier runs (leftovers.ts). It never fails the run.
  const swept = sweepTemporaries(request.destination, relativePath(request.destinationPath), request.run, signal, log);
  const queue = new PQueue({ concurrency: options.concurrency });
  let jobError: string | null = null;
  // A soft cutoff (issue 25, jobs/cutoff.ts): no file starts after it; the listing stops and the run is left unfinished.
  const mayStart = () => request.limits?.mayStart() ?? true;
  let cutOff = false;
  // The destination is prepared while the source connects and lists its first page; nothing is
  // written before it is ready. (Awaited below; the catch only keeps an early failure from being
  // reported as unhandled meanwhile.)
  const prepared = writer.prepare();
  prepared.catch(() => undefined);
  try {
    for await (const item of listed(request, log)) {
      await prepared;
      if (signal.aborted) break;
      if (item.entry.kind === 'file') stats.fileListed();
      // Back-pressure on the listing: take the next entry only when the queue has room.
      await queue.onSizeLessThan(options.concurrency);
      if (signal.aborted) break;
      if (!mayStart()) {
        cutOff = true;
        break;
      }
      void queue.add(async () => {
        if (mayStart()) await writer.consume(item);
        else cutOff = true;
      });
    }
    await prepared;
    if (!signal.aborted && !cutOff) stats.listingDone();
  } catch (err) {
    if (!signal.aborted) {
      jobError = reasonOf(err);
      log?.error({ err: jobError }, 'listing or preparing failed');
    }
  }
  await queue.onIdle();
  await swept;
  const counters = { ...stats.counters };
  if (signal.aborted) return { status: 'cancelled', counters };
  if (jobError !== null) {
    const files = stats.failureCount > 0 ? `; ${stats.failureMessage()}` : '';
    return { status: 'failed', counters, error: truncate(`${jobError}${files}`, MAX_ERROR_CHARS) };
  }
  if (stats.failureCount > 0) return { status: 'failed', counters, error: stats.failureMessage() };
  if (cutOff) return { status: 'failed', counters, error: SOFT_CUTOFF_ERROR };
  return { status: 'completed', counters };
}

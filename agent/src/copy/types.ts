import type { Readable } from 'node:stream';
import type { FileResult, JobOptions, PlanItem, VerifiedFile } from '@xfer/shared';
import type { AskVerified } from './earlier-results.js';
import type { Connector, Entry, RangeReader } from '../connectors/types.js';
import { DEFAULT_MULTI_STREAM, type MultiStreamTuning } from './multi-stream.js';

/** Cumulative counters of one run, named as in `job.progress`. */
export interface CopyCounters {
  /** Files found so far; final once `listing_done`. */
  files_total: number;
  files_transferred: number;
  files_skipped: number;
  files_failed: number;
  /** Files deleted (`sync`: at the destination; `move`: at the source). */
  files_deleted: number;
  /**
   * Bytes of copied files plus the bytes of files in flight. The bytes of an attempt that fails
   * are taken back out, so the counter can step back on a retry; at the end it is exactly the
   * size of the files copied.
   */
  bytes_transferred: number;
  listing_done: boolean;
}

/** What the engine tells its caller while it runs (all optional, all cheap to call). */
export interface CopyObserver {
  /** A file finished: copied, skipped or failed (never called for files cut short by a cancel). */
  fileDone?(result: FileResult, counters: Readonly<CopyCounters>): void;
  /** Bytes moved, or the listing advanced. Called very often: must not do I/O itself. */
  changed?(counters: Readonly<CopyCounters>): void;
}

/** Retry and naming knobs; the defaults are for production, tests shorten the waits. */
export interface CopyTuning {
  /** Extra attempts per file after a transient failure (default 3). */
  retries: number;
  /** First backoff ceiling between attempts (default 500 ms), doubled per attempt, full jitter. */
  retryBaseMs: number;
  retryMaxMs: number;
  /** Several streams per large file (copy/multi-stream.ts); `streams: 1` turns them off. */
  multiStream: MultiStreamTuning;
}

export const DEFAULT_TUNING: CopyTuning = { retries: 3, retryBaseMs: 500, retryMaxMs: 10_000, multiStream: DEFAULT_MULTI_STREAM };

/**
 * Where a run's items come from: a connector and the path on it (read-side.ts lists it), or items
 * of their own (the destination side of a relay: relay/relay-destination.ts).
 */
export type CopySource =
  | { source: Connector; sourcePath: string; items?: undefined }
  | { items: AsyncIterable<SourceItem>; source?: undefined; sourcePath?: undefined };

/** One run of a transfer: both ends, the paths on them, the options and a signal that cancels it. */
export type CopyRequest = CopySource & CopyRun;

/** A run reading a source connector itself (no relay). */
export type DirectCopyRequest = CopyRun & { source: Connector; sourcePath: string };

/** A run but for where its items come from. */
export interface CopyRun {
  destination: Connector;
  destinationPath: string;
  options: JobOptions;
  /**
   * A run after the first (a retry, a takeover): with `askVerified`, files an earlier attempt
   * recorded verified and still at the destination are skipped (plan.ts); without it (an older
   * control plane) every file follows the overwrite policy.
   */
  resume: boolean;
  /** The control plane's stored results of earlier attempts, asked in batches as files are listed (copy/earlier-results.ts). */
  askVerified?: AskVerified;
  /** The job and attempt this run is: named in its temporary names, and its earlier attempts' leftovers are removed (copy/leftovers.ts). */
  run?: { jobId: string; attempt: number };
  signal: AbortSignal;
  observer?: CopyObserver;
  tuning?: Partial<CopyTuning>;
  /** The run's bandwidth limit and soft cutoff (options.bandwidth_limit, the agent's timetable, window, max_duration); none: unlimited. */
  limits?: RunLimits;
  /**
   * The items of a stored plan to apply (`job.assign.plan_id`), in path order: the run does
   * exactly those, each only when both sides still look as the plan saw them (copy/sync-engine.ts).
   */
  plan?: AsyncIterable<PlanItem>;
}

/**
 * What limits a run while it goes (issue 25): the bytes per second of all its streams together,
 * and whether a new file may still start. A hard cutoff is no business of the engine's: the job
 * runner aborts the run's signal, as for a cancel, and reports the cutoff.
 */
export interface RunLimits {
  /** `body` paced to the run's (and the agent's) bandwidth limit; `body` itself when there is none. Errors of `body` come out of the result. */
  pace(body: Readable, signal: AbortSignal): Readable;
  /** False once a soft cutoff passed: the engine starts no new file (files already started finish). */
  mayStart(): boolean;
}

/** How a run ended. `error` names the failing files (first few) or the job-level cause. */
export interface CopyOutcome {
  status: 'completed' | 'failed' | 'cancelled';
  counters: CopyCounters;
  error?: string;
}

/**
 * One item of the source side: a file or a directory, with a path relative to the job's source
 * path (for a single-file source: the file's name). A relay between two agents produces the same
 * items on the destination's side, its `open` handing out the relayed stream.
 */
export interface SourceItem {
  path: string;
  entry: Entry;
  /**
   * The file's bytes. Called once per attempt: each call reads the file again (a relay's asks the
   * source agent for it again).
   */
  open(signal: AbortSignal): Promise<Readable>;
  /** What an earlier attempt of the job recorded verified for this file (resume runs only; copy/earlier-results.ts). */
  earlier?: VerifiedFile;
  /**
   * The modification time the source store keeps for this file, for an entry whose listing shows
   * another (`entry.modifiedAtNeedsStat`: an S3 object's `mtime` metadata comes only with a stat).
   * Absent: the listing's time is the file's.
   */
  keptModifiedAt?(signal: AbortSignal): Promise<Date | undefined>;
  /**
   * Where the file is, for a source this agent reads itself (not a relay's): a destination on the
   * same store and account may copy it there (`Connector.copyFrom`) instead of the bytes moving.
   */
  at?: { connector: Connector; path: string };
  /** The file opened for ranged reads, one per stream of a multi-stream read (copy/multi-stream.ts); absent: only whole reads. */
  rangeReader?(signal: AbortSignal): Promise<RangeReader>;
}

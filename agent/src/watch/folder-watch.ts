import type { Connector, Entry } from '../connectors/types.js';
import { versionIdentity } from './identity.js';
import { checkFilterOptions, compileFilters, compileNamePattern, NamePatternError, type FileFilter, type FilterOptions } from '@xfer/shared';
import { digest, pathKey, VersionTable } from './version-table.js';

/**
 * What a watcher watches (the fields of a watcher in scope-areas.md "Watchers", as the control
 * plane will send them). Checked by `checkWatchSpec`.
 */
export interface WatchSpec {
  /** The folder, relative to the connection's base path (`''` or `/`: the base itself). */
  path: string;
  /**
   * A glob on the file **name** (shared/src/name-pattern.ts: `*`, `?`, `[a-z]`, `[!a-z]`, `{csv,txt}`, a
   * leading `!` negates). `*` does not match names starting with a dot (hidden and temporary files
   * such as rsync's `.name.XXXXXX`); a pattern that starts with a dot does.
   */
  pattern: string;
  /** Files in the sub-folders too (the pattern still applies to the name only). */
  recursive: boolean;
  /** How long (seconds, 0–86400) a version must be seen unchanged before it is reported. */
  stable_seconds: number;
  /** Report the files already there at the first complete listing (else they are the baseline). */
  include_existing: boolean;
  /**
   * rclone filter rules and size/age bounds (shared/src/filters; docs/api.md "Filters"), on paths
   * relative to `path`: a file they exclude is not reported (as if it were not there: one that
   * passes later, say older than `min_age`, is new then), a directory they prune is not listed.
   */
  filters?: FilterOptions;
}

/**
 * How the first listing of a watcher that has no state here is read (watch-protocol.ts
 * `AssignedWatcher`: the control plane knows where the baseline ends when this agent does not).
 */
export interface FirstListing {
  /**
   * On the first listing, a file modified at or after this time is new (it waits `stable_seconds`,
   * then is reported), an older one is the baseline; `include_existing` is not looked at. Absent:
   * the first listing is the baseline, or everything with `include_existing`.
   */
  report_since?: Date;
  /** With `report_since`: a file whose store gives no modification time is new (true) or baseline (false, the default). */
  report_undated?: boolean;
}

/** One new version of a file, as a poll reports it. */
export interface FileVersion {
  /** Relative to the connection's base path, no leading slash. */
  path: string;
  /** The file name (the last segment of `path`). */
  name: string;
  size: number;
  /** ISO 8601, when the store gives a modification time. */
  modified_at?: string;
  /** The version identity (identity.ts): `etag:…` or `size:…:mtime:…`. */
  version: string;
}

export interface PollOptions {
  /**
   * Receives each new stable version, in listing order, awaited one at a time: a version counts
   * as reported once this resolves. When it rejects, the poll stops with that error and the
   * version (and every one after it) is offered again by the next poll.
   */
  report(version: FileVersion): void | Promise<void>;
  signal?: AbortSignal;
  /** The clock stability is measured with (ms); `Date.now` unless a test steps it. */
  now?: () => number;
}

/** What one poll did. */
export interface PollSummary {
  /** Files listed (directories not counted). */
  listed: number;
  /** Files whose name matched the pattern. */
  matched: number;
  /** Versions reported by this poll. */
  reported: number;
  /** Matching files whose current version waits to become stable. */
  waiting: number;
  /** Files forgotten because the listing no longer shows them. */
  removed: number;
  /** Bytes of the watcher's state after the poll. */
  state_bytes: number;
}

/** A watch spec (or first-listing option) that cannot be used; the message starts with the field's name. */
export class WatchSpecError extends Error {
  /** `message` follows the field's name, or (`named`) already starts with it. */
  constructor(readonly field: keyof WatchSpec | keyof FirstListing, message: string, named = false) {
    super(named ? message : `${field} ${message}`);
    this.name = 'WatchSpecError';
  }
}

export const MAX_STABLE_SECONDS = 86_400;
const MAX_PATTERN_LENGTH = 1024;

/** Throws a `WatchSpecError` naming the first field of `spec` that is not usable. */
export function checkWatchSpec(spec: WatchSpec): void {
  if (typeof spec.path !== 'string') throw new WatchSpecError('path', 'must be a string');
  const { pattern } = spec;
  if (typeof pattern !== 'string' || pattern.length === 0) throw new WatchSpecError('pattern', 'must be a non-empty string');
  if (pattern.length > MAX_PATTERN_LENGTH) throw new WatchSpecError('pattern', `must be at most ${MAX_PATTERN_LENGTH} characters`);
  if (pattern.includes('/')) throw new WatchSpecError('pattern', 'matches file names and cannot contain "/" (use recursive for sub-folders)');
  compilePattern(pattern);
  if (typeof spec.recursive !== 'boolean') throw new WatchSpecError('recursive', 'must be true or false');
  const s = spec.stable_seconds;
  if (!Number.isInteger(s) || s < 0 || s > MAX_STABLE_SECONDS) throw new WatchSpecError('stable_seconds', `must be a whole number from 0 to ${MAX_STABLE_SECONDS}`);
  if (typeof spec.include_existing !== 'boolean') throw new WatchSpecError('include_existing', 'must be true or false');
  if (spec.filters !== undefined) {
    const problem = checkFilterOptions(spec.filters, 'filters');
    if (problem) throw new WatchSpecError('filters', problem, true);
  }
}

/** Throws a `WatchSpecError` naming the first field of `first` that is not usable. */
export function checkFirstListing(first: FirstListing): void {
  const since = first.report_since;
  if (since !== undefined && !(since instanceof Date && !Number.isNaN(since.getTime()))) throw new WatchSpecError('report_since', 'must be a valid date and time');
  if (first.report_undated !== undefined && typeof first.report_undated !== 'boolean') throw new WatchSpecError('report_undated', 'must be true or false');
}

function compilePattern(pattern: string): (name: string) => boolean {
  try {
    return compileNamePattern(pattern);
  } catch (err) {
    if (err instanceof NamePatternError) throw new WatchSpecError('pattern', err.message);
    throw err;
  }
}

/**
 * One watcher's poller on the agent. Each `poll` lists the folder once through the connector's
 * streaming `list` and reports, through `options.report`, the file versions that are new since
 * the previous polls and have been seen unchanged for `stable_seconds`. Between polls it keeps
 * only a `VersionTable` (fixed bytes per file, no strings), so memory does not depend on path
 * lengths, and a poll holds no more than the entry in hand (docs/agent.md "Watching a folder").
 *
 * Each version is reported once by this object; a file whose identity changes is a new version
 * (reported again once stable); a file gone from one complete listing is forgotten, so one that
 * comes back is new. The state is in memory only: a new FolderWatch (agent restart, another agent)
 * knows nothing, so for a watcher whose baseline was taken before, the caller passes
 * `report_since` (a while before the last poll: only what changed since is new) or
 * `include_existing: true`, and whoever keeps the reports (the control plane, behind a unique
 * index) drops the versions it already has.
 */
export class FolderWatch {
  readonly spec: Readonly<WatchSpec>;
  private readonly matches: (name: string) => boolean;
  /** `report_since` in ms; NaN without it. */
  private readonly sinceMs: number;
  private readonly reportUndated: boolean;
  private readonly table = new VersionTable();
  private epoch = 0;
  private primed = false;
  private polling = false;

  /** Throws `WatchSpecError` for a spec or first-listing option that cannot be used. */
  constructor(spec: WatchSpec, first: FirstListing = {}) {
    checkWatchSpec(spec);
    checkFirstListing(first);
    this.spec = Object.freeze({ ...spec });
    this.matches = compilePattern(spec.pattern);
    this.sinceMs = first.report_since?.getTime() ?? Number.NaN;
    this.reportUndated = first.report_undated === true;
  }

  /** A complete listing has been taken (the baseline, when `include_existing` is false). */
  get started(): boolean {
    return this.primed;
  }

  /** Bytes of the state kept between polls (what `PollSummary.state_bytes` said last). */
  get stateBytes(): number {
    return this.table.byteLength;
  }

  /**
   * Whether a file of the first listing, seen in this version for the first time, is part of the
   * baseline (recorded as known, never reported) rather than new.
   */
  private isBaseline(entry: Entry): boolean {
    if (this.primed) return false;
    if (Number.isNaN(this.sinceMs)) return !this.spec.include_existing;
    const mtime = entry.modifiedAt?.getTime();
    if (mtime === undefined || Number.isNaN(mtime)) return !this.reportUndated;
    return mtime < this.sinceMs;
  }

  /**
   * Lists the folder once and reports what became new and stable. Rejects with the connector's
   * `ConnectorError` (NOT_FOUND when the folder is missing, TRANSIENT, AUTH, …), with the error of
   * `report`, or with the abort reason; what was not reported then is offered again next time.
   * Polls of one FolderWatch must not overlap (the second is refused).
   */
  async poll(connector: Connector, options: PollOptions): Promise<PollSummary> {
    if (this.polling) throw new Error('a poll of this watch is already running');
    this.polling = true;
    try {
      return await this.run(connector, options);
    } finally {
      this.polling = false;
    }
  }

  private async run(connector: Connector, options: PollOptions): Promise<PollSummary> {
    const { signal } = options;
    const now = options.now ?? Date.now;
    const stableMs = this.spec.stable_seconds * 1000;
    const epoch = (this.epoch = (this.epoch + 1) >>> 0);
    const table = this.table;
    const summary: PollSummary = { listed: 0, matched: 0, reported: 0, waiting: 0, removed: 0, state_bytes: 0 };
    // Ages count back from this poll.
    const filter = compileFilters(this.spec.filters, new Date(now()));

    for await (const entry of this.listing(connector, filter, signal)) {
      signal?.throwIfAborted();
      if (entry.kind !== 'file') continue;
      summary.listed++;
      const name = entry.path.slice(entry.path.lastIndexOf('/') + 1);
      if (!this.matches(name)) continue;
      if (!filter.empty && !filter.includeFile(this.relative(entry.path), entry.size, validDate(entry.modifiedAt))) continue;
      summary.matched++;

      const key = pathKey(entry.path);
      const version = versionIdentity(connector.type, entry);
      const [idHi, idLo] = digest(version);
      const t = now();
      const slot = table.get(key);
      const same = slot !== undefined && slot.idHi === idHi && slot.idLo === idLo;
      if (!same) {
        // New file, or a new version of one: stable from now on, unless it changes again. Until a
        // listing completes, what it shows may be the baseline (isBaseline).
        const baseline = this.isBaseline(entry);
        table.set(key, { idHi, idLo, since: t, reported: baseline }, epoch);
        if (baseline || stableMs > 0) {
          if (!baseline) summary.waiting++;
          continue;
        }
      } else {
        table.touch(key, epoch);
        if (slot.reported) continue;
        if (t - slot.since < stableMs) {
          summary.waiting++;
          continue;
        }
      }
      await options.report({
        path: entry.path,
        name,
        size: entry.size,
        ...(entry.modifiedAt && !Number.isNaN(entry.modifiedAt.getTime()) ? { modified_at: entry.modifiedAt.toISOString() } : {}),
        version,
      });
      table.set(key, { idHi, idLo, since: same ? slot.since : t, reported: true }, epoch);
      summary.reported++;
    }

    // Only a complete listing says what is gone (and ends the baseline).
    summary.removed = table.sweep(epoch);
    this.primed = true;
    summary.state_bytes = table.byteLength;
    return summary;
  }

  /** `path` (relative to the connection's base) relative to the watched folder, as the filters see it. */
  private relative(path: string): string {
    const base = this.spec.path.replace(/^\/+|\/+$/g, '');
    const p = path.replace(/^\/+/, '');
    return base !== '' && p.startsWith(`${base}/`) ? p.slice(base.length + 1) : p;
  }

  /**
   * The watched folder's entries. A recursive watch whose filters prune directories walks the tree
   * one directory at a time and never lists a directory `includeDirectory` refuses (rclone's
   * directory filtering); otherwise the connector lists the tree in one go.
   */
  private async *listing(connector: Connector, filter: FileFilter, signal: AbortSignal | undefined): AsyncIterable<Entry> {
    if (!this.spec.recursive || filter.empty || !filter.prunes) {
      yield* connector.list(this.spec.path, { recursive: this.spec.recursive, signal });
      return;
    }
    // Directories still to list, depth first; only the sub-directories of the one in hand are held.
    const pending = [this.spec.path];
    while (pending.length > 0) {
      const dir = pending.pop()!;
      const below: string[] = [];
      for await (const entry of connector.list(dir, { recursive: false, signal })) {
        if (entry.kind === 'directory') {
          if (filter.includeDirectory(this.relative(entry.path))) below.push(entry.path);
          continue;
        }
        yield entry;
      }
      pending.push(...below.reverse());
    }
  }
}

function validDate(d: Date | undefined): Date | undefined {
  return d && !Number.isNaN(d.getTime()) ? d : undefined;
}

import type { Connector } from '../connectors/types.js';
import { versionIdentity } from './identity.js';
import { compileNamePattern, NamePatternError } from '@xfer/shared';
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

/** A watch spec that cannot be used; the message starts with the field's name. */
export class WatchSpecError extends Error {
  constructor(readonly field: keyof WatchSpec, message: string) {
    super(`${field} ${message}`);
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
 * `include_existing: true` and whoever keeps the reports (the control plane, behind a unique index)
 * drops the versions it already has.
 */
export class FolderWatch {
  readonly spec: Readonly<WatchSpec>;
  private readonly matches: (name: string) => boolean;
  private readonly table = new VersionTable();
  private epoch = 0;
  private primed = false;
  private polling = false;

  /** Throws `WatchSpecError` for a spec that cannot be used. */
  constructor(spec: WatchSpec) {
    checkWatchSpec(spec);
    this.spec = Object.freeze({ ...spec });
    this.matches = compilePattern(spec.pattern);
  }

  /** A complete listing has been taken (the baseline, when `include_existing` is false). */
  get started(): boolean {
    return this.primed;
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
    // Until a listing completes, what it shows is the baseline (unless existing files count).
    const baseline = !this.primed && !this.spec.include_existing;
    const epoch = (this.epoch = (this.epoch + 1) >>> 0);
    const table = this.table;
    const summary: PollSummary = { listed: 0, matched: 0, reported: 0, waiting: 0, removed: 0, state_bytes: 0 };

    for await (const entry of connector.list(this.spec.path, { recursive: this.spec.recursive, signal })) {
      signal?.throwIfAborted();
      if (entry.kind !== 'file') continue;
      summary.listed++;
      const name = entry.path.slice(entry.path.lastIndexOf('/') + 1);
      if (!this.matches(name)) continue;
      summary.matched++;

      const key = pathKey(entry.path);
      const version = versionIdentity(connector.type, entry);
      const [idHi, idLo] = digest(version);
      const t = now();
      const slot = table.get(key);
      const same = slot !== undefined && slot.idHi === idHi && slot.idLo === idLo;
      if (!same) {
        // New file, or a new version of one: stable from now on, unless it changes again.
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
}

import type { FilterOptions } from '../protocol/job-options.js';

/**
 * Which files a run considers (issue 25; docs/api.md "Filters"): rclone's filter rules and its
 * size and age bounds, one implementation for the agent's runs and plans, the control plane's
 * validation and the watchers.
 *
 * Paths are relative to the transfer's source (or destination) root, `/`-separated, without a
 * leading slash; a rule anchored with `/` is anchored at that root, as rclone anchors at the
 * root of the remote path.
 */
export interface FileFilter {
  /** No rule and no bound: everything passes (callers may skip the matcher). */
  readonly empty: boolean;
  /** The file at `path` is part of the run. `modifiedAt` unknown: the age bounds let it pass. */
  includeFile(path: string, size: number, modifiedAt?: Date): boolean;
  /**
   * The directory at `path` may hold files the rules include: false means the whole subtree is
   * excluded and is never listed (rclone's directory pruning).
   */
  includeDirectory(path: string): boolean;
}

const PASS_ALL: FileFilter = { empty: true, includeFile: () => true, includeDirectory: () => true };

/**
 * Compiles validated filter options (`checkFilterOptions` passed) for a run starting at `now`
 * (ages count back from it). Throws on rules that do not parse.
 */
export function compileFilters(options: FilterOptions | undefined, now: Date): FileFilter {
  void now;
  if (!options || ((options.rules?.length ?? 0) === 0 && options.min_size === undefined && options.max_size === undefined
    && options.min_age === undefined && options.max_age === undefined)) return PASS_ALL;
  throw new Error('filters: not implemented yet (issue 25)');
}

/** Why these filter options cannot be stored (a message naming the field and rule, e.g. `options.filters.rules[2]: …`), or null. */
export function checkFilterOptions(options: FilterOptions, field = 'options.filters'): string | null {
  void options;
  void field;
  return null;
}

import type { FilterOptions } from '../protocol/job-options.js';
import { buildRules, RuleSet } from './rules.js';

/**
 * Which files a run considers (issue 25; docs/api.md "Filters"): rclone's filter rules and its
 * size and age bounds, one implementation for the agent's runs and plans, the control plane's
 * validation and the watchers.
 *
 * Paths are relative to the transfer's source (or destination) root, `/`-separated, without a
 * leading slash; a rule anchored with `/` is anchored at that root, as rclone anchors at the
 * root of the remote path.
 *
 * The rules behave as rclone 1.75's fs/filter/filter.go (ported here; the translation of a glob
 * is ./glob.ts, its matching ./regexp.ts): a file is matched against the file rules, first match
 * wins, no match includes it; the directory rules rclone derives from them (`Add`, below) decide
 * which directories are listed at all. e2e/test/filters-rclone.e2e.test.ts checks the result
 * against the rclone binary on generated trees.
 */
export interface FileFilter {
  /** No rule and no bound: everything passes (callers may skip the matcher). */
  readonly empty: boolean;
  /**
   * Some directory may be pruned (rclone's UsesDirectoryFilters): false means includeDirectory
   * always says yes, so a caller may list the tree in one go (rclone then uses ListR).
   */
  readonly prunes: boolean;
  /**
   * The file at `path` is part of the run. `modifiedAt` unknown: the age bounds let it pass. A file
   * below a directory `includeDirectory` refuses is out whatever this says (rclone never lists it:
   * `+ x/y` then `- **` says yes to `a/x/y` but no to `a`), so walk the tree with includeDirectory.
   */
  includeFile(path: string, size: number, modifiedAt?: Date): boolean;
  /**
   * The directory at `path` may hold files the rules include: false means the whole subtree is
   * excluded and is never listed (rclone's directory pruning).
   */
  includeDirectory(path: string): boolean;
}

const PASS_ALL: FileFilter = { empty: true, prunes: false, includeFile: () => true, includeDirectory: () => true };

/** Filter options that select something: a rule or a bound (absent or empty: every file passes). */
export function hasFilters(options: FilterOptions | undefined): boolean {
  return !!options && ((options.rules?.length ?? 0) > 0 || options.min_size !== undefined || options.max_size !== undefined
    || options.min_age !== undefined || options.max_age !== undefined);
}

/**
 * Compiles validated filter options (`checkFilterOptions` passed) for a run starting at `now`
 * (ages count back from it). Throws on rules that do not parse.
 */
export function compileFilters(options: FilterOptions | undefined, now: Date): FileFilter {
  if (!options || !hasFilters(options)) return PASS_ALL;
  const built = buildRules(options.rules ?? []);
  if (!(built instanceof RuleSet)) {
    throw new Error(`filters: rules[${built.index}] ${JSON.stringify(options.rules![built.index])} is not a valid pattern: ${built.reason}`);
  }
  const { min_size: minSize, max_size: maxSize } = options;
  // rclone: --min-age keeps files modified at or before now - min_age, --max-age at or after now - max_age.
  const modifiedTo = options.min_age === undefined ? undefined : now.getTime() - options.min_age * 1000;
  const modifiedFrom = options.max_age === undefined ? undefined : now.getTime() - options.max_age * 1000;
  const firstDirRule = built.dirs.list[0];
  return {
    empty: false,
    prunes: firstDirRule !== undefined && !(firstDirRule.include && firstDirRule.re.source === '^.*$'),
    includeFile(path: string, size: number, modifiedAt?: Date): boolean {
      if (modifiedAt) {
        const t = modifiedAt.getTime();
        if (modifiedFrom !== undefined && t < modifiedFrom) return false;
        if (modifiedTo !== undefined && t > modifiedTo) return false;
      }
      if (minSize !== undefined && size < minSize) return false;
      if (maxSize !== undefined && size > maxSize) return false;
      return built.files.include(path);
    },
    includeDirectory(path: string): boolean {
      const dir = path.replace(/^\/+|\/+$/g, '');
      // The root is always listed.
      if (dir === '') return true;
      return built.dirs.include(`${dir}/`);
    },
  };
}

/** Why these filter options cannot be stored (a message naming the field and rule, e.g. `options.filters.rules[2]: …`), or null. */
export function checkFilterOptions(options: FilterOptions, field = 'options.filters'): string | null {
  if (options.min_size !== undefined && options.max_size !== undefined && options.min_size > options.max_size) {
    return `${field}.min_size (${options.min_size}) is larger than ${field}.max_size (${options.max_size})`;
  }
  // rclone refuses equal ages too (it reads the clock once per bound, so the window is negative).
  if (options.min_age !== undefined && options.max_age !== undefined && options.min_age >= options.max_age) {
    return `${field}.min_age (${options.min_age}) must be smaller than ${field}.max_age (${options.max_age}): no file is both older than min_age and younger than max_age`;
  }
  const built = buildRules(options.rules ?? []);
  if (built instanceof RuleSet) return null;
  return `${field}.rules[${built.index}]: ${JSON.stringify(options.rules![built.index])} is not a valid pattern: ${built.reason}`;
}

import { Flags } from '@oclif/core';
import {
  COMPARE_MODES, CUTOFF_MODES, RUN_MODES, type CompareMode, type CutoffMode, type FilterOptions, type RunMode, type TransferOptionsInput,
} from '@xfer/shared';
import { usageError } from '../base-command.js';

/**
 * The issue-25 options as flags, spelled as rclone spells them (docs/cli.md "Sync, filters and
 * limits"), so that a nightly `rclone sync` line moves over with its flags: sizes with rclone's
 * suffixes, durations with rclone's units, `--include`/`--exclude`/`--filter` as ordered rules.
 */

const SIZE_UNITS: Readonly<Record<string, number>> = { b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4, p: 1024 ** 5 };

/**
 * A size as rclone reads one: a number with a suffix B, K, M, G, T or P (powers of 1024, any case,
 * an optional trailing `i`/`iB`/`B`), and, like rclone, KiB when there is none. Bytes, or undefined.
 */
export function parseRcloneSize(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(?:([bkmgtp])(?:i?b)?)?$/i.exec(text.trim());
  if (!m) return undefined;
  const bytes = Number(m[1]) * SIZE_UNITS[(m[2] ?? 'k').toLowerCase()]!;
  return Number.isSafeInteger(Math.round(bytes)) ? Math.round(bytes) : undefined;
}

const DURATION_UNITS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 };

/** A duration as rclone reads one: `90`, `90s`, `15m`, `1h30m`, `2d`, `1w` (seconds when no unit). Whole seconds, or undefined. */
export function parseRcloneDuration(text: string): number | undefined {
  const t = text.trim().toLowerCase();
  if (/^\d+$/.test(t)) return Number(t);
  if (!/^(\d+(\.\d+)?[smhdw])+$/.test(t)) return undefined;
  let seconds = 0;
  for (const [, n, unit] of t.matchAll(/(\d+(?:\.\d+)?)([smhdw])/g)) seconds += Number(n) * DURATION_UNITS[unit!]!;
  return Number.isSafeInteger(Math.round(seconds)) ? Math.round(seconds) : undefined;
}

const FILTER_FLAGS = ['filter', 'include', 'exclude'] as const;
type FilterFlag = (typeof FILTER_FLAGS)[number];

/**
 * The filter rules of `--filter`, `--include` and `--exclude` in the order they were given on the
 * command line (`argv`; rclone keeps that order: the first rule that matches decides): `--filter`
 * lines as they are, `--include P` as `+ P`, `--exclude P` as `- P`. When any `--include` is given,
 * `- **` closes the list, as rclone adds it: whatever no include names is left out.
 */
export function filterRules(argv: readonly string[], given: Partial<Record<FilterFlag, string[]>>): string[] {
  const asRule = (flag: FilterFlag, value: string) => (flag === 'include' ? `+ ${value}` : flag === 'exclude' ? `- ${value}` : value);
  const ordered: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') break;
    const m = /^--(filter|include|exclude)(?:=(.*))?$/s.exec(arg);
    if (!m) continue;
    const value = m[2] ?? argv[++i];
    if (value !== undefined) ordered.push(asRule(m[1] as FilterFlag, value));
  }
  const total = FILTER_FLAGS.reduce((n, f) => n + (given[f]?.length ?? 0), 0);
  // Flags oclif read some other way (an abbreviation): their order is theirs, filters first.
  const rules = ordered.length === total ? ordered : FILTER_FLAGS.flatMap((f) => (given[f] ?? []).map((v) => asRule(f, v)));
  if ((given.include?.length ?? 0) > 0) rules.push('- **');
  return rules;
}

/** The flags of the rules and bounds (`sync` and `transfers create`). */
export const filterFlags = {
  filter: Flags.string({ description: 'A filter rule, rclone style: "+ PATTERN" or "- PATTERN" (repeatable; in order with --include/--exclude, the first match decides)', multiple: true }),
  include: Flags.string({ description: 'Include files matching PATTERN, as rclone --include (repeatable; anything not included is left out)', multiple: true }),
  exclude: Flags.string({ description: 'Exclude files matching PATTERN, as rclone --exclude (repeatable; a directory pattern ending in / prunes the subtree)', multiple: true }),
  'min-size': Flags.string({ description: 'Only files of at least this size (rclone units: 100k, 10M, 1G; KiB without a suffix)' }),
  'max-size': Flags.string({ description: 'Only files of at most this size (rclone units: 100k, 10M, 1G; KiB without a suffix)' }),
  'min-age': Flags.string({ description: 'Only files older than this (rclone units: 90s, 15m, 2h, 7d, 1w; seconds without a unit)' }),
  'max-age': Flags.string({ description: 'Only files younger than this (rclone units: 90s, 15m, 2h, 7d, 1w; seconds without a unit)' }),
};

/** The flags of deletions and limits (`sync` and `transfers create`). */
export const limitFlags = {
  compare: Flags.string({ description: 'How a file on both sides is judged unchanged (server default: size_mtime)', options: [...COMPARE_MODES] }),
  'max-delete': Flags.string({ description: 'Sync: refuse every deletion of a run that would delete more than N files, or N% of the destination\'s' }),
  bwlimit: Flags.string({ description: 'Bandwidth limit of the transfer across all its streams, per second (rclone units: 512k, 10M; KiB without a suffix)' }),
  'max-duration': Flags.string({ description: 'Stop a run after this long (rclone units: 30m, 2h; then --cutoff)' }),
  window: Flags.string({ description: 'Run only between these times of day, "HH:MM-HH:MM" (in --window-tz; may span midnight)' }),
  'window-tz': Flags.string({ description: 'IANA time zone of --window (default: this computer\'s, e.g. Europe/Paris)', dependsOn: ['window'] }),
  cutoff: Flags.string({ description: 'At the end of the window or --max-duration: hard stops now, soft starts no new file (server default: hard)', options: [...CUTOFF_MODES] }),
};

/** Every issue-25 flag, with `--mode` (transfers create, schedules, watchers). */
export const syncOptionFlags = {
  mode: Flags.string({ description: 'copy (server default), sync (also delete destination files the source does not have) or move (delete each source file once copied)', options: [...RUN_MODES] }),
  ...limitFlags,
  ...filterFlags,
};
export const SYNC_OPTION_FLAGS = Object.keys(syncOptionFlags) as Array<keyof typeof syncOptionFlags>;

export type SyncOptionFlags = Partial<Record<Exclude<keyof typeof syncOptionFlags, FilterFlag>, string>> & Partial<Record<FilterFlag, string[]>>;

const WINDOW = /^(\d{2}:\d{2})-(\d{2}:\d{2})$/;

function checked<T>(flag: string, text: string, value: T | undefined, expected: string): T {
  if (value === undefined) throw usageError(`--${flag} "${text}" is not ${expected}`);
  return value;
}

/**
 * The options the flags given set (none given: an empty object). Values the CLI can read are
 * checked here (a usage error naming the flag); the rest (rule syntax, time zones, bounds) is the
 * server's to check, which names the field.
 */
export function syncOptions(f: SyncOptionFlags, argv: readonly string[]): TransferOptionsInput {
  const options: TransferOptionsInput = {};
  if (f.mode !== undefined) options.mode = f.mode as RunMode;
  if (f.compare !== undefined) options.compare = f.compare as CompareMode;
  if (f.cutoff !== undefined) options.cutoff = f.cutoff as CutoffMode;
  const size = (flag: string, text: string) => checked(flag, text, parseRcloneSize(text), 'a size (e.g. 512k, 10M, 1.5G)');
  const duration = (flag: string, text: string) => checked(flag, text, parseRcloneDuration(text), 'a duration (e.g. 90s, 15m, 2h, 7d)');
  const filters: FilterOptions = {};
  const rules = filterRules(argv, f);
  if (rules.length > 0) filters.rules = rules;
  if (f['min-size'] !== undefined) filters.min_size = size('min-size', f['min-size']);
  if (f['max-size'] !== undefined) filters.max_size = size('max-size', f['max-size']);
  if (f['min-age'] !== undefined) filters.min_age = duration('min-age', f['min-age']);
  if (f['max-age'] !== undefined) filters.max_age = duration('max-age', f['max-age']);
  if (Object.keys(filters).length > 0) options.filters = filters;
  if (f['max-delete'] !== undefined) {
    const text = f['max-delete'].trim();
    options.max_delete = /^\d+$/.test(text) ? Number(text) : checked('max-delete', text, /^\d+(\.\d+)?%$/.test(text) ? text : undefined, 'a count or a percentage (e.g. 100, 10%)');
  }
  if (f.bwlimit !== undefined) options.bandwidth_limit = size('bwlimit', f.bwlimit.replace(/\/s$/i, ''));
  if (f['max-duration'] !== undefined) options.max_duration = duration('max-duration', f['max-duration']);
  if (f.window !== undefined) {
    const m = checked('window', f.window, WINDOW.exec(f.window.trim()) ?? undefined, 'a window "HH:MM-HH:MM" (e.g. 22:00-06:00)');
    options.window = { start: m[1]!, end: m[2]!, tz: f['window-tz'] ?? Intl.DateTimeFormat().resolvedOptions().timeZone };
  }
  return options;
}

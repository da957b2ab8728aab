import { Type, type Static } from '@sinclair/typebox';
import { StringEnum } from '../schemas/common.js';

/** The options of a transfer job as the agent receives them (decisions.md "Transfers"; issue 25). */

/** Overwrite policy of a transfer (decisions.md "Transfers"). */
export const OVERWRITE_POLICIES = ['always', 'if_changed', 'never'] as const;
export type OverwritePolicy = (typeof OVERWRITE_POLICIES)[number];
/** How the destination is verified. */
export const VERIFY_MODES = ['checksum', 'size'] as const;
export type VerifyMode = (typeof VERIFY_MODES)[number];

/**
 * What a run does with the two trees (issue 25, docs/api.md "Sync, move and filters"): `copy`
 * writes new and changed files; `sync` also deletes destination files the filtered source does
 * not have, once every copy of the run is verified; `move` deletes each source file once its copy
 * is verified.
 */
export const RUN_MODES = ['copy', 'sync', 'move'] as const;
export type RunMode = (typeof RUN_MODES)[number];
/** How a file present on both sides is judged unchanged (`overwrite: if_changed`). */
export const COMPARE_MODES = ['size_mtime', 'checksum', 'size'] as const;
export type CompareMode = (typeof COMPARE_MODES)[number];
/** What a run does when its window or `max_duration` ends (rclone `--cutoff-mode`): `hard` stops now, `soft` starts no new file. */
export const CUTOFF_MODES = ['hard', 'soft'] as const;
export type CutoffMode = (typeof CUTOFF_MODES)[number];

/** Most filter rules one transfer may carry, and the longest rule. */
export const MAX_FILTER_RULES = 1000;
export const MAX_FILTER_RULE_LENGTH = 1024;

/**
 * Which source (and, for `sync`, destination) files a run considers: rclone's filter rules
 * (`+ pattern` / `- pattern`, first match wins; shared/src/filters) and rclone's size and age
 * bounds. Sizes in bytes, ages in seconds before the run's start. A file outside them is neither
 * copied nor, at the destination, deleted.
 */
export const FilterOptions = Type.Object(
  {
    rules: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: MAX_FILTER_RULE_LENGTH }), { maxItems: MAX_FILTER_RULES })),
    min_size: Type.Optional(Type.Integer({ minimum: 0 })),
    max_size: Type.Optional(Type.Integer({ minimum: 0 })),
    min_age: Type.Optional(Type.Integer({ minimum: 0 })),
    max_age: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: false },
);
export type FilterOptions = Static<typeof FilterOptions>;

/** A daily run window: `HH:MM` 24-hour local times in the IANA zone `tz` (end before start: the window spans midnight). */
export const RunWindow = Type.Object(
  {
    start: Type.String({ pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$' }),
    end: Type.String({ pattern: '^([01][0-9]|2[0-3]):[0-5][0-9]$' }),
    tz: Type.String({ minLength: 1, maxLength: 64 }),
  },
  { additionalProperties: false },
);
export type RunWindow = Static<typeof RunWindow>;

/** `max_delete`: a count of files, or a percentage of the destination's files (`"10%"`), like rclone `--max-delete`. */
export const MaxDelete = Type.Union([
  Type.Integer({ minimum: 0 }),
  Type.String({ pattern: '^(100|[0-9]{1,2})(\\.[0-9]{1,3})?%$' }),
]);
export type MaxDelete = Static<typeof MaxDelete>;

/**
 * Options of a transfer job with every default filled in (the control plane fills them). The
 * issue-25 options are optional: a stored transfer from before them runs as `copy` with no
 * filter, limit or window, and agents from before them are never sent a job that uses them
 * (`hello.sync`).
 */
export const JobOptions = Type.Object({
  overwrite: StringEnum(OVERWRITE_POLICIES),
  verify: StringEnum(VERIFY_MODES),
  /** Files copied at once (1–64). */
  concurrency: Type.Integer({ minimum: 1, maximum: 64 }),
  mode: Type.Optional(StringEnum(RUN_MODES)),
  /** Default `size_mtime`. */
  compare: Type.Optional(StringEnum(COMPARE_MODES)),
  filters: Type.Optional(FilterOptions),
  /** `sync` only: refuse every deletion of the run when more would be deleted than this. */
  max_delete: Type.Optional(MaxDelete),
  /** Bytes per second across all the run's streams. */
  bandwidth_limit: Type.Optional(Type.Integer({ minimum: 1024 })),
  /** Seconds the run may take; then `cutoff`. */
  max_duration: Type.Optional(Type.Integer({ minimum: 1 })),
  /** The run goes on only inside this daily window; at its end, `cutoff`. */
  window: Type.Optional(RunWindow),
  /** Default `hard`. */
  cutoff: Type.Optional(StringEnum(CUTOFF_MODES)),
});
export type JobOptions = Static<typeof JobOptions>;

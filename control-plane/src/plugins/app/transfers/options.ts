import {
  checkFilterOptions, DEFAULT_TRANSFER_OPTIONS, hasFilters, type FilterOptions, type JobOptions, type TransferOptionsInput,
} from '@xfer/shared';
import { BadRequestError } from '../../../errors.js';

/**
 * The options of a transfer (docs/api.md "Transfer job" and "Sync, move and plans"): checked where
 * they are stored (transfers, schedules, watchers, workflow transfer steps) and filled with their
 * defaults. The issue-25 defaults (`mode: copy`, `compare: size_mtime`, `cutoff: hard`) are today's
 * behaviour, so a transfer stored before them presents and runs the same (`presentedOptions`).
 */
export const ISSUE_25_DEFAULTS = { mode: 'copy', compare: 'size_mtime', cutoff: 'hard' } as const satisfies Partial<JobOptions>;

/** Whether `tz` is an IANA time zone this runtime knows (the agent resolves windows with the same Intl data). */
function knownTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/**
 * Throws a 400 naming the field for options the request schema lets through but that cannot run:
 * filter rules that do not parse, bounds that exclude everything, an unknown window time zone or an
 * empty window, and `max_delete` without `mode: sync` (the one mode that deletes at the destination;
 * refused rather than ignored, so nobody believes a copy or move is guarded by it). `field` is the
 * options' path in the request (`options`, `transfer.options`, `steps[2].options`).
 */
export function checkTransferOptions(options: TransferOptionsInput | undefined, field: string): void {
  if (!options) return;
  const problem = (options.filters && checkFilterOptions(options.filters, `${field}.filters`))
    ?? (options.window && !knownTimeZone(options.window.tz) ? `${field}.window.tz is not a known IANA time zone: '${options.window.tz}'` : null)
    ?? (options.window && options.window.start === options.window.end ? `${field}.window.start and ${field}.window.end are the same time: the window would never open` : null)
    ?? (options.max_delete !== undefined && options.mode !== 'sync'
      ? `${field}.max_delete applies to mode sync only (mode is ${options.mode ?? 'copy'}): only sync deletes at the destination`
      : null);
  if (problem) throw new BadRequestError(problem);
}

/** The options to store: checked (`checkTransferOptions`), every default filled in. */
export function storedOptions(options: TransferOptionsInput | undefined, field: string): JobOptions {
  checkTransferOptions(options, field);
  return { ...DEFAULT_TRANSFER_OPTIONS, ...ISSUE_25_DEFAULTS, ...options };
}

/** Stored options as the API shows them: every default filled in, also on transfers stored before issue 25. */
export function presentedOptions(stored: unknown): JobOptions {
  const options: Record<string, unknown> = {};
  for (const [key, value] of Object.entries((stored ?? {}) as Record<string, unknown>)) if (value !== null && value !== undefined) options[key] = value;
  return { ...DEFAULT_TRANSFER_OPTIONS, ...ISSUE_25_DEFAULTS, ...options } as JobOptions;
}

/**
 * Whether a run with these options (and `planId`) needs an agent that said `hello.sync`: any
 * issue-25 option away from its default, or a plan to apply. Such a job is never sent to an agent
 * from before issue 25, which would ignore the options and copy everything.
 */
export function needsSync(stored: unknown, planId?: unknown): boolean {
  if (planId) return true;
  const o = presentedOptions(stored);
  return o.mode !== 'copy' || o.compare !== 'size_mtime' || hasFilters(o.filters) || o.max_delete !== undefined
    || o.bandwidth_limit !== undefined || o.max_duration !== undefined || o.window !== undefined;
}

/**
 * The options of a `job.assign`: the three of every agent, plus the issue-25 ones only for a job
 * that needs them (`needsSync`), so that the frames of plain copies stay what every agent knows.
 */
export function jobOptions(stored: unknown, planId?: unknown): JobOptions {
  const o = presentedOptions(stored);
  if (!needsSync(stored, planId)) return { overwrite: o.overwrite, verify: o.verify, concurrency: o.concurrency };
  // A copy whose only new option is a limit or a window keeps the agent's lazy path (a stat per
  // file, no destination listing): the default `compare` is left out, since an agent compares
  // listings whenever `compare` is given (docs/agent.md "Sync, move and plans").
  if (o.mode === 'copy' && o.compare === ISSUE_25_DEFAULTS.compare && !planId) {
    const { compare: _default, ...rest } = o;
    return rest;
  }
  return o;
}

/**
 * What the source agent of a relayed run needs to list as the destination compares
 * (`relay.source.listing`): in path order and filtered, for a run whose options make the agent
 * compare listings (`jobOptions` keeps `compare`, or the mode or filters ask for it). Absent: the
 * lazy listing of a plain copy.
 */
export function relayListing(stored: unknown): { mode?: JobOptions['mode']; filters?: FilterOptions; compare?: JobOptions['compare'] } | undefined {
  const o = jobOptions(stored);
  const filtered = hasFilters(o.filters);
  if ((o.mode ?? 'copy') === 'copy' && o.compare === undefined && !filtered) return undefined;
  return { ...(o.mode ? { mode: o.mode } : {}), ...(filtered ? { filters: o.filters } : {}), ...(o.compare ? { compare: o.compare } : {}) };
}

import type { CutoffMode, JobOptions, RunWindow } from '@xfer/shared';
import type { Clock } from '../copy/bandwidth.js';
import type { CopyCounters } from '../copy/types.js';
import { addDays, formatWall, instantOf, isTimeZone, minuteOfDay, wallClock } from '../lib/zoned-time.js';

/**
 * When a run must stop (issue 25, docs/agent.md "Bandwidth limits and run windows"): at the end of
 * its daily `window` (in the window's own time zone) or `max_duration` after it started, whichever
 * comes first. `cutoff: hard` (default) aborts the run there, like a cancel (partial files are
 * removed); `soft` starts no new file and lets the running ones finish.
 */

export type CutoffCause = 'window' | 'max_duration';

/** Where a run's window stands at an instant. */
export interface WindowState {
  inside: boolean;
  /** Inside: when the window closes (null: it never does, start = end). */
  closesAt: number | null;
  /** Outside: when it opens next. */
  opensAt: number | null;
}

/**
 * The window at the instant `ms`. A window whose end is before its start spans midnight; one whose
 * start equals its end is open all day. Times are wall-clock times in `window.tz`: on the day the
 * clocks go forward a time they skip is reached at the jump, and on the day they go back a time
 * that occurs twice is reached at its first occurrence (zoned-time.ts instantOf).
 */
export function windowAt(window: RunWindow, ms: number): WindowState {
  const start = minuteOfDay(window.start);
  const end = minuteOfDay(window.end);
  if (start === end) return { inside: true, closesAt: null, opensAt: null };
  const w = wallClock(ms, window.tz);
  const now = w.hour * 60 + w.minute;
  const today = { year: w.year, month: w.month, day: w.day };
  const inside = start < end ? now >= start && now < end : now >= start || now < end;
  if (inside) {
    const closesAt = instantOf(start < end || now < end ? today : addDays(today, 1), end, window.tz);
    // Only on the day the clocks go back: the end's first occurrence passed already (its second one is not the end).
    if (closesAt > ms) return { inside: true, closesAt, opensAt: null };
  }
  let opensAt = instantOf(now < start ? today : addDays(today, 1), start, window.tz);
  if (opensAt <= ms) opensAt = instantOf(addDays(today, 1), start, window.tz);
  return { inside: false, closesAt: null, opensAt };
}

/** When and why a run is cut off, decided once at its start. */
export interface CutoffPlan {
  mode: CutoffMode;
  /** When the run must stop (ms since the epoch); null: never. */
  at: number | null;
  cause: CutoffCause | null;
  /** The run started outside its window: it ends at once, and this is when the window opens next. */
  outsideUntil: number | null;
}

export function planCutoff(options: Pick<JobOptions, 'max_duration' | 'window' | 'cutoff'>, startMs: number): CutoffPlan {
  const mode = options.cutoff ?? 'hard';
  let at: number | null = null;
  let cause: CutoffCause | null = null;
  if (options.window) {
    if (!isTimeZone(options.window.tz)) throw new Error(`options.window.tz: unknown time zone ${JSON.stringify(options.window.tz)} (an IANA zone such as Europe/Berlin)`);
    const state = windowAt(options.window, startMs);
    if (!state.inside) return { mode, at: startMs, cause: 'window', outsideUntil: state.opensAt };
    if (state.closesAt !== null) {
      at = state.closesAt;
      cause = 'window';
    }
  }
  if (options.max_duration !== undefined) {
    const end = startMs + options.max_duration * 1000;
    if (at === null || end < at) {
      at = end;
      cause = 'max_duration';
    }
  }
  return { mode, at, cause, outsideUntil: null };
}

/** Files of the run not (yet) copied, skipped or failed: what the next run still has to do. */
export function workLeft(c: Pick<CopyCounters, 'files_total' | 'files_transferred' | 'files_skipped' | 'files_failed' | 'listing_done'>): boolean {
  return !c.listing_done || c.files_transferred + c.files_skipped + c.files_failed < c.files_total;
}

/**
 * The `job.failed` error of a run cut off: what stopped it and how far it got, e.g. "run window
 * 19:00–06:00 Europe/Berlin ended (hard cutoff): 120 of 300 files done; the next run resumes".
 */
export function cutoffMessage(plan: CutoffPlan, options: Pick<JobOptions, 'max_duration' | 'window'>, counters: Pick<CopyCounters, 'files_total' | 'files_transferred' | 'files_skipped' | 'files_failed' | 'listing_done'>): string {
  if (plan.outsideUntil !== null && options.window) {
    const tz = options.window.tz;
    return `started outside its ${describeWindow(options.window)}: the window opens next at ${formatWall(plan.outsideUntil, tz)} ${tz} (${new Date(plan.outsideUntil).toISOString()}); nothing was copied`;
  }
  const what = plan.cause === 'window' && options.window ? `${describeWindow(options.window)} ended` : `max_duration of ${options.max_duration ?? 0} s reached`;
  const done = counters.files_transferred + counters.files_skipped;
  const failed = counters.files_failed > 0 ? `, ${counters.files_failed} failed` : '';
  const progress = counters.listing_done ? `${done} of ${counters.files_total} files done` : `${done} files done of the ${counters.files_total} listed so far`;
  const how = plan.mode === 'soft' ? 'soft cutoff: the running files finished' : 'hard cutoff';
  return `${what} (${how}): ${progress}${failed}; the next run resumes`;
}

function describeWindow(w: RunWindow): string {
  return `run window ${w.start}–${w.end} ${w.tz}`;
}

/** Longest delay setTimeout takes (about 24.8 days); a later cutoff is reached in several steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A run's cutoff while it goes: `mayStart()` (RunLimits) turns false at the cutoff, and with
 * `hard` the `onHard` callback runs then (the job runner aborts the run). Holds one timer, for
 * a hard cutoff only.
 */
export class RunCutoff {
  private timer: NodeJS.Timeout | null = null;

  constructor(readonly plan: CutoffPlan, private readonly clock: Clock = Date.now) {}

  /** True once the cutoff time passed. */
  passed(): boolean {
    return this.plan.at !== null && this.clock() >= this.plan.at;
  }

  mayStart(): boolean {
    return !this.passed();
  }

  /** Arms the hard cutoff; `onHard` runs once at the cutoff (at once if it passed already). */
  arm(onHard: () => void): void {
    const at = this.plan.at;
    if (this.plan.mode !== 'hard' || at === null) return;
    const step = () => {
      const left = at - this.clock();
      if (left <= 0) {
        this.timer = null;
        onHard();
        return;
      }
      this.timer = setTimeout(step, Math.min(left, MAX_TIMER_MS));
    };
    step();
  }

  disarm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

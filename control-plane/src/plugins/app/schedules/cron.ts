import { Cron } from 'croner';
import { BadRequestError } from '../../../errors.js';
import { isTimeZone } from '../../../lib/templates.js';

/**
 * Cron expressions of schedules (scope-areas.md "Schedules"), read by croner: five fields
 * (minute hour day-of-month month day-of-week) in an IANA time zone. Croner's own 6- and 7-field
 * forms (seconds, years) are refused: a schedule has minute precision.
 *
 * Around DST changes croner follows Vixie cron (docs/automation.md "Schedules"): a fixed time
 * (one value each in minute and hour, `30 2 * * *`) that falls in the skipped hour runs at the
 * first time after the gap, and one that falls in the repeated hour runs once, at its first
 * occurrence; an interval expression (`*\/15 * * * *`, `0 1-3 * * *`) skips the times of the gap
 * and runs in both passes of the repeated hour.
 */

const FIELDS = 'minute hour day-of-month month day-of-week';

function cronOf(cron: string, timezone: string): Cron {
  return new Cron(cron, { timezone, mode: '5-part', paused: true });
}

/** Checks a cron expression: 400 naming `cron` when it is not five valid fields or never matches a time. */
export function checkCron(cron: string): void {
  const fields = cron.trim().split(/\s+/).length;
  if (fields !== 5) {
    throw new BadRequestError(`cron must have exactly 5 fields (${FIELDS}), not ${fields}; seconds and years are not supported`);
  }
  let parsed: Cron;
  try {
    parsed = cronOf(cron, 'UTC');
  } catch (err) {
    throw new BadRequestError(`cron is not valid: ${(err as Error).message.replace(/^CronPattern: /, '')}`);
  }
  if (parsed.nextRun() === null) throw new BadRequestError('cron never matches a time (e.g. the 30th of February)');
}

/** Checks a time zone: 400 naming `timezone` when it is not an IANA name. */
export function checkTimeZone(timezone: string): void {
  if (!isTimeZone(timezone)) throw new BadRequestError(`timezone "${timezone}" is not a known IANA time zone (e.g. Europe/Berlin, UTC)`);
}

/** The first due time strictly after `after`, or null when there is none (a checked expression always has one). */
export function nextDueAfter(cron: string, timezone: string, after: Date): Date | null {
  return cronOf(cron, timezone).nextRun(after);
}

/** The newest due time at or before `now`, or null when there was none. */
export function latestDueAtOrBefore(cron: string, timezone: string, now: Date): Date | null {
  // previousRuns is strictly before its reference.
  return cronOf(cron, timezone).previousRuns(1, new Date(now.getTime() + 1))[0] ?? null;
}

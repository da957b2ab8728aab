/**
 * Wall-clock time in an IANA time zone, with nothing but Intl (no time-zone library): what the
 * bandwidth timetable (copy/bandwidth.ts) and the run windows (jobs/cutoff.ts) are written in.
 */

/** A calendar date (month 1–12). */
export interface LocalDate {
  year: number;
  month: number;
  day: number;
}

/** What a clock on the wall of `tz` shows at an instant; weekday 0 = Sunday. */
export interface WallClock extends LocalDate {
  hour: number;
  minute: number;
  second: number;
  weekday: number;
}

const WEEKDAYS: Record<string, number> = { Sun: 0, Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6 };
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz, hourCycle: 'h23', weekday: 'short',
      year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric',
    });
    formatters.set(tz, f);
  }
  return f;
}

/** True when the runtime knows `tz` as a time zone. */
export function isTimeZone(tz: string): boolean {
  try {
    formatter(tz);
    return true;
  } catch {
    return false;
  }
}

/** The zone this process runs in (TZ, else the system's). */
export function localTimeZone(): string {
  return new Intl.DateTimeFormat().resolvedOptions().timeZone;
}

export function wallClock(ms: number, tz: string): WallClock {
  const parts: Record<string, string> = {};
  for (const p of formatter(tz).formatToParts(new Date(ms))) parts[p.type] = p.value;
  return {
    year: Number(parts.year), month: Number(parts.month), day: Number(parts.day),
    hour: Number(parts.hour) % 24, minute: Number(parts.minute), second: Number(parts.second),
    weekday: WEEKDAYS[parts.weekday!] ?? 0,
  };
}

/** How far `tz`'s wall clock is ahead of UTC at `ms` (milliseconds; whole seconds). */
export function offsetAt(ms: number, tz: string): number {
  const w = wallClock(ms, tz);
  return Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second) - Math.floor(ms / 1000) * 1000;
}

export function addDays(date: LocalDate, days: number): LocalDate {
  const d = new Date(Date.UTC(date.year, date.month - 1, date.day + days));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
}

/**
 * The first instant at which `tz`'s wall clock reads `minuteOfDay` (or later) on `date`. A time
 * that occurs twice (clocks set back) is its first occurrence; one that does not occur (clocks set
 * forward past it) is the instant of the jump, when the clock first shows a later time.
 */
export function instantOf(date: LocalDate, minuteOfDay: number, tz: string): number {
  const local = Date.UTC(date.year, date.month - 1, date.day, 0, minuteOfDay);
  // Zones change their offset at most once within a day on either side (true of every zone in use).
  const offsets = [...new Set([offsetAt(local - 86_400_000, tz), offsetAt(local + 86_400_000, tz)])];
  const valid = offsets.map((o) => local - o).filter((t) => offsetAt(t, tz) === local - t);
  if (valid.length > 0) return Math.min(...valid);
  // In the gap of a jump forward: search the instant of the jump (offset changes) between the two readings.
  let lo = Math.min(...offsets.map((o) => local - o));
  let hi = Math.max(...offsets.map((o) => local - o));
  const before = offsetAt(lo, tz);
  while (hi - lo > 1000) {
    const mid = lo + Math.floor((hi - lo) / 2000) * 1000;
    if (offsetAt(mid, tz) === before) lo = mid;
    else hi = mid;
  }
  return hi;
}

/** `HH:MM` as minutes since midnight (validated by the caller's schema). */
export function minuteOfDay(hhmm: string): number {
  const [h, m] = hhmm.split(':').map(Number) as [number, number];
  return h * 60 + m;
}

/** `YYYY-MM-DD HH:MM` of an instant in `tz`. */
export function formatWall(ms: number, tz: string): string {
  const w = wallClock(ms, tz);
  const p = (n: number) => String(n).padStart(2, '0');
  return `${w.year}-${p(w.month)}-${p(w.day)} ${p(w.hour)}:${p(w.minute)}`;
}

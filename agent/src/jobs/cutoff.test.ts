import { instantOf } from '../lib/zoned-time.js';
import { cutoffMessage, planCutoff, RunCutoff, windowAt, workLeft } from './cutoff.js';

const at = (iso: string) => Date.parse(iso);
const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
const counters = (done: number, total: number, listing_done = true) => ({ files_total: total, files_transferred: done, files_skipped: 0, files_failed: 0, listing_done });

describe('run window', () => {
  test('a same-day window: inside until its end, outside until its next start', () => {
    const w = { start: '09:00', end: '17:30', tz: 'UTC' };
    expect(windowAt(w, at('2026-06-10T12:00:00Z'))).toEqual({ inside: true, closesAt: at('2026-06-10T17:30:00Z'), opensAt: null });
    expect(windowAt(w, at('2026-06-10T09:00:00Z')).inside).toBe(true);
    expect(windowAt(w, at('2026-06-10T17:30:00Z'))).toEqual({ inside: false, closesAt: null, opensAt: at('2026-06-11T09:00:00Z') });
    expect(windowAt(w, at('2026-06-10T08:59:59Z'))).toEqual({ inside: false, closesAt: null, opensAt: at('2026-06-10T09:00:00Z') });
  });

  test('a window spanning midnight in its own zone', () => {
    const w = { start: '19:00', end: '06:00', tz: 'Europe/Berlin' };
    // 23:00 CEST (21:00Z): closes tomorrow 06:00 CEST.
    expect(windowAt(w, at('2026-06-10T21:00:00Z'))).toEqual({ inside: true, closesAt: at('2026-06-11T04:00:00Z'), opensAt: null });
    // 02:00 CEST after midnight: closes today 06:00.
    expect(windowAt(w, at('2026-06-11T00:00:00Z')).closesAt).toBe(at('2026-06-11T04:00:00Z'));
    // 12:00 CEST: opens at 19:00 today.
    expect(windowAt(w, at('2026-06-11T10:00:00Z'))).toEqual({ inside: false, closesAt: null, opensAt: at('2026-06-11T17:00:00Z') });
    // The same instant, a zone 9 hours ahead: 19:00 in Tokyo is 10:00Z, so at 10:00Z the window is open.
    expect(windowAt({ ...w, tz: 'Asia/Tokyo' }, at('2026-06-11T10:00:00Z')).inside).toBe(true);
    // start = end: open all day, never closing.
    expect(windowAt({ start: '00:00', end: '00:00', tz: 'UTC' }, at('2026-06-11T10:00:00Z'))).toEqual({ inside: true, closesAt: null, opensAt: null });
  });

  test('daylight saving: the night the clocks go forward is an hour shorter, the night they go back an hour longer', () => {
    const w = { start: '22:00', end: '06:00', tz: 'Europe/Berlin' };
    // 2026-03-29 02:00 CET → 03:00 CEST.
    const spring = windowAt(w, at('2026-03-28T21:00:00Z')); // 22:00 CET
    expect(iso(spring.closesAt)).toBe('2026-03-29T04:00:00.000Z'); // 06:00 CEST
    expect(spring.closesAt! - at('2026-03-28T21:00:00Z')).toBe(7 * 3600_000);
    // 2026-10-25 03:00 CEST → 02:00 CET.
    const autumn = windowAt(w, at('2026-10-24T20:00:00Z')); // 22:00 CEST
    expect(iso(autumn.closesAt)).toBe('2026-10-25T05:00:00.000Z'); // 06:00 CET
    expect(autumn.closesAt! - at('2026-10-24T20:00:00Z')).toBe(9 * 3600_000);
  });

  test('daylight saving: a time the clocks skip is reached at the jump, a time they show twice at its first occurrence', () => {
    // 02:30 does not exist in Berlin on 2026-03-29: reached at 01:00Z (03:00 CEST).
    expect(iso(instantOf({ year: 2026, month: 3, day: 29 }, 150, 'Europe/Berlin'))).toBe('2026-03-29T01:00:00.000Z');
    // 02:30 occurs twice on 2026-10-25 (00:30Z CEST, 01:30Z CET): the first.
    expect(iso(instantOf({ year: 2026, month: 10, day: 25 }, 150, 'Europe/Berlin'))).toBe('2026-10-25T00:30:00.000Z');
    // New York, 2026-03-08 02:00 EST → 03:00 EDT.
    expect(iso(instantOf({ year: 2026, month: 3, day: 8 }, 150, 'America/New_York'))).toBe('2026-03-08T07:00:00.000Z');
    // A window ending in the skipped hour ends at the jump.
    const w = { start: '01:00', end: '02:30', tz: 'Europe/Berlin' };
    expect(iso(windowAt(w, at('2026-03-29T00:15:00Z')).closesAt)).toBe('2026-03-29T01:00:00.000Z');
    // A window ending in the repeated hour: at its second 02:10 the end (first 02:30) has passed: outside.
    const back = { start: '01:00', end: '02:30', tz: 'Europe/Berlin' };
    expect(iso(windowAt(back, at('2026-10-25T00:10:00Z')).closesAt)).toBe('2026-10-25T00:30:00.000Z');
    expect(windowAt(back, at('2026-10-25T01:10:00Z'))).toEqual({ inside: false, closesAt: null, opensAt: at('2026-10-26T00:00:00Z') });
  });
});

describe('cutoff plan', () => {
  const start = at('2026-06-10T12:00:00Z');

  test('no window, no max_duration: never', () => {
    expect(planCutoff({}, start)).toEqual({ mode: 'hard', at: null, cause: null, outsideUntil: null });
  });

  test('a window in a zone the runtime does not know is refused, naming the option', () => {
    expect(() => planCutoff({ window: { start: '08:00', end: '09:00', tz: 'Mars/Olympus' } }, start)).toThrow(
      'options.window.tz: unknown time zone "Mars/Olympus" (an IANA zone such as Europe/Berlin)',
    );
  });

  test('whichever comes first of the window end and max_duration; the mode defaults to hard', () => {
    const window = { start: '08:00', end: '13:00', tz: 'UTC' };
    expect(planCutoff({ max_duration: 600 }, start)).toEqual({ mode: 'hard', at: start + 600_000, cause: 'max_duration', outsideUntil: null });
    expect(planCutoff({ window, max_duration: 7200, cutoff: 'soft' }, start)).toEqual({ mode: 'soft', at: at('2026-06-10T13:00:00Z'), cause: 'window', outsideUntil: null });
    expect(planCutoff({ window, max_duration: 60 }, start)).toMatchObject({ at: start + 60_000, cause: 'max_duration' });
  });

  test('started outside its window: cut off at once, saying when the window opens next', () => {
    const window = { start: '19:00', end: '06:00', tz: 'Europe/Berlin' };
    const plan = planCutoff({ window, max_duration: 60 }, start); // 14:00 CEST
    expect(plan).toEqual({ mode: 'hard', at: start, cause: 'window', outsideUntil: at('2026-06-10T17:00:00Z') });
    expect(cutoffMessage(plan, { window }, counters(0, 0, false))).toBe(
      'started outside its run window 19:00–06:00 Europe/Berlin: the window opens next at 2026-06-10 19:00 Europe/Berlin (2026-06-10T17:00:00.000Z); nothing was copied',
    );
  });

  test('messages say what stopped the run and how far it got', () => {
    const window = { start: '19:00', end: '06:00', tz: 'Europe/Berlin' };
    const night = at('2026-06-10T20:00:00Z');
    expect(cutoffMessage(planCutoff({ window }, night), { window }, counters(120, 300))).toBe(
      'run window 19:00–06:00 Europe/Berlin ended (hard cutoff): 120 of 300 files done; the next run resumes',
    );
    expect(cutoffMessage(planCutoff({ max_duration: 2, cutoff: 'soft' }, night), { max_duration: 2 }, { ...counters(3, 40, false), files_skipped: 2, files_failed: 1 })).toBe(
      'max_duration of 2 s reached (soft cutoff: the running files finished): 5 files done of the 40 listed so far, 1 failed; the next run resumes',
    );
  });

  test('work left: the listing unfinished, or files neither done nor failed', () => {
    expect(workLeft(counters(3, 3))).toBe(false);
    expect(workLeft(counters(3, 3, false))).toBe(true);
    expect(workLeft(counters(2, 3))).toBe(true);
    expect(workLeft({ ...counters(2, 3), files_failed: 1 })).toBe(false);
  });
});

describe('run cutoff (injected clock)', () => {
  test('mayStart turns false at the cutoff; a soft cutoff arms no timer', () => {
    let now = 1_000;
    const cutoff = new RunCutoff({ mode: 'soft', at: 5_000, cause: 'max_duration', outsideUntil: null }, () => now);
    let fired = false;
    cutoff.arm(() => { fired = true; });
    expect(cutoff.mayStart()).toBe(true);
    now = 4_999;
    expect(cutoff.mayStart()).toBe(true);
    now = 5_000;
    expect(cutoff.mayStart()).toBe(false);
    expect(cutoff.passed()).toBe(true);
    expect(fired).toBe(false);
  });

  test('a hard cutoff already passed fires at once; none never fires', () => {
    let fired = 0;
    new RunCutoff({ mode: 'hard', at: 5_000, cause: 'window', outsideUntil: null }, () => 6_000).arm(() => fired++);
    expect(fired).toBe(1);
    const never = new RunCutoff({ mode: 'hard', at: null, cause: null, outsideUntil: null }, () => 6_000);
    never.arm(() => fired++);
    expect(never.mayStart()).toBe(true);
    expect(fired).toBe(1);
  });
});

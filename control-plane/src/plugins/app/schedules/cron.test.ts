import { checkCron, checkTimeZone, latestDueAtOrBefore, nextDueAfter } from './cron.js';

const BERLIN = 'Europe/Berlin';
const iso = (d: Date | null) => d?.toISOString() ?? null;
/** The next `n` due times after `from`, each found from the one before (as the firing loop advances). */
function dueTimes(cron: string, timezone: string, from: string, n: number): string[] {
  const out: string[] = [];
  let at = new Date(from);
  for (let i = 0; i < n; i++) {
    const next = nextDueAfter(cron, timezone, at)!;
    out.push(next.toISOString());
    at = next;
  }
  return out;
}

describe('Europe/Berlin next_run_at across the DST changes of 2026', () => {
  // Spring: 2026-03-29 02:00 CET → 03:00 CEST (01:00Z); 02:00–02:59 local do not exist.
  // Autumn: 2026-10-25 03:00 CEST → 02:00 CET (01:00Z); 02:00–02:59 local happen twice.

  test('a daily 09:00 moves from 08:00Z to 07:00Z in spring and back in autumn', () => {
    expect(dueTimes('0 9 * * *', BERLIN, '2026-03-27T12:00:00Z', 3)).toEqual([
      '2026-03-28T08:00:00.000Z', '2026-03-29T07:00:00.000Z', '2026-03-30T07:00:00.000Z',
    ]);
    expect(dueTimes('0 9 * * *', BERLIN, '2026-10-24T00:00:00Z', 3)).toEqual([
      '2026-10-24T07:00:00.000Z', '2026-10-25T08:00:00.000Z', '2026-10-26T08:00:00.000Z',
    ]);
  });

  test('a fixed time in the skipped hour (02:30) runs once, at 03:00 CEST, right after the gap', () => {
    expect(dueTimes('30 2 * * *', BERLIN, '2026-03-28T00:00:00Z', 3)).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 02:30 does not exist: 03:00 CEST
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
    ]);
  });

  test('a fixed time in the repeated hour (02:30) runs once, at its first occurrence (CEST)', () => {
    expect(dueTimes('30 2 * * *', BERLIN, '2026-10-24T00:00:00Z', 3)).toEqual([
      '2026-10-24T00:30:00.000Z', // 02:30 CEST
      '2026-10-25T00:30:00.000Z', // the first 02:30 (CEST); the second (01:30Z, CET) does not run
      '2026-10-26T01:30:00.000Z', // 02:30 CET
    ]);
  });

  test('an interval expression skips the missing times in spring and runs both passes of the repeated hour in autumn', () => {
    expect(dueTimes('*/30 * * * *', BERLIN, '2026-03-29T00:00:00Z', 4)).toEqual([
      '2026-03-29T00:30:00.000Z', // 01:30 CET
      '2026-03-29T01:00:00.000Z', // 03:00 CEST: 02:00 and 02:30 never happen
      '2026-03-29T01:30:00.000Z',
      '2026-03-29T02:00:00.000Z',
    ]);
    expect(dueTimes('*/30 * * * *', BERLIN, '2026-10-24T23:30:00Z', 6)).toEqual([
      '2026-10-25T00:00:00.000Z', // 02:00 CEST
      '2026-10-25T00:30:00.000Z', // 02:30 CEST
      '2026-10-25T01:00:00.000Z', // 02:00 CET (the repeated hour)
      '2026-10-25T01:30:00.000Z', // 02:30 CET
      '2026-10-25T02:00:00.000Z', // 03:00 CET
      '2026-10-25T02:30:00.000Z',
    ]);
  });

  test('the newest due time at or before a moment includes the moment itself and follows the zone', () => {
    expect(iso(latestDueAtOrBefore('0 9 * * *', BERLIN, new Date('2026-03-29T07:00:00Z')))).toBe('2026-03-29T07:00:00.000Z');
    expect(iso(latestDueAtOrBefore('0 9 * * *', BERLIN, new Date('2026-03-29T06:59:59Z')))).toBe('2026-03-28T08:00:00.000Z');
    // After a week down, the newest missed time only (the catch-up run), never the ones before it.
    expect(iso(latestDueAtOrBefore('*/5 * * * *', 'UTC', new Date('2026-01-08T10:07:13Z')))).toBe('2026-01-08T10:05:00.000Z');
  });

  test('UTC has no DST: a daily 02:30 stays at 02:30Z through both dates', () => {
    expect(dueTimes('30 2 * * *', 'UTC', '2026-03-28T12:00:00Z', 2)).toEqual(['2026-03-29T02:30:00.000Z', '2026-03-30T02:30:00.000Z']);
    expect(dueTimes('30 2 * * *', 'UTC', '2026-10-24T12:00:00Z', 2)).toEqual(['2026-10-25T02:30:00.000Z', '2026-10-26T02:30:00.000Z']);
  });
});

describe('checkCron', () => {
  test.each(['* * * * *', '0 2 * * 1-5', '*/15 8-18 * * MON-FRI', '0 0 1 JAN *', '0 12 L * *'])('accepts %s', (cron) => {
    expect(() => checkCron(cron)).not.toThrow();
  });

  test('6 and 7 fields (seconds, years) are a 400 naming cron', () => {
    expect(() => checkCron('0 * * * * *')).toThrow(/^cron must have exactly 5 fields .* not 6; seconds and years are not supported$/);
    expect(() => checkCron('0 0 0 1 1 * 2030')).toThrow(/^cron must have exactly 5 fields .* not 7/);
    expect(() => checkCron('* * * *')).toThrow(/^cron must have exactly 5 fields .* not 4/);
  });

  test.each([['61 * * * *', /^cron is not valid: .*minute/], ['* 24 * * *', /^cron is not valid: .*hour/], ['a b c d e', /^cron is not valid/], ['0 0 30 2 *', /^cron never matches a time/]])(
    '%s is a 400 naming cron', (cron, message) => {
      expect(() => checkCron(cron)).toThrow(message);
    },
  );
});

describe('checkTimeZone', () => {
  test('IANA names pass, anything else is a 400 naming timezone', () => {
    expect(() => checkTimeZone('Europe/Berlin')).not.toThrow();
    expect(() => checkTimeZone('UTC')).not.toThrow();
    expect(() => checkTimeZone('Mars/Olympus_Mons')).toThrow('timezone "Mars/Olympus_Mons" is not a known IANA time zone (e.g. Europe/Berlin, UTC)');
  });
});

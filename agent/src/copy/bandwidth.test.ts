import { PassThrough, Readable } from 'node:stream';
import { AgentBandwidth, BandwidthTimetable, PacedStream, runPacer, TokenBucket } from './bandwidth.js';

/** A clock the test moves by hand. */
function manualClock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => { now += ms; } };
}

const KiB = 1024;
const MiB = 1024 * KiB;

describe('token bucket (injected clock)', () => {
  test('an idle bucket lets a burst of 100 ms of its rate through at once, then bytes are due at the rate', () => {
    const clock = manualClock();
    const bucket = new TokenBucket(() => 10_000, clock.now);
    // 1000 bytes = 100 ms at 10,000 B/s: exactly the burst.
    expect(bucket.reserve(1000)).toBe(0);
    // The next 500 bytes are due 150 ms from now; less the burst: wait 50 ms.
    expect(bucket.reserve(500)).toBe(50);
    // Several callers queue in call order: each waits behind the bytes reserved before it.
    expect(bucket.reserve(500)).toBe(100);
    // 100 ms later: 2000 bytes reserved were due by 200 ms; 1000 more by 300 ms, less the burst and the 100 ms gone.
    clock.advance(100);
    expect(bucket.reserve(1000)).toBe(100);
  });

  test('the sustained rate is the limit: N seconds of bytes take N seconds less the burst', () => {
    const clock = manualClock();
    const bucket = new TokenBucket(() => 20_000_000, clock.now);
    let waited = 0;
    for (let sent = 0; sent < 200_000_000; sent += 64 * KiB) {
      const wait = bucket.reserve(Math.min(64 * KiB, 200_000_000 - sent));
      // The caller sleeps until its bytes are due.
      clock.advance(wait);
      waited = Math.max(waited, wait);
    }
    // 200 MB at 20 MB/s: 10 s from the first byte, the last slice released 100 ms (the burst) early.
    expect(clock.now() - 1_000_000).toBeGreaterThanOrEqual(9_899);
    expect(clock.now() - 1_000_000).toBeLessThanOrEqual(9_901);
    expect(waited).toBeLessThan(5);
  });

  test('an idle bucket keeps no credit beyond the burst, and no debt while its rate is off', () => {
    const clock = manualClock();
    let rate: number | null = 1000;
    const bucket = new TokenBucket(() => rate, clock.now);
    clock.advance(60_000);
    expect(bucket.reserve(100)).toBe(0);
    expect(bucket.reserve(1000)).toBe(1000);
    rate = null;
    expect(bucket.reserve(10 * MiB)).toBe(0);
    rate = 1000;
    // Back on: the bytes that passed while it was off are not owed.
    expect(bucket.reserve(100)).toBe(0);
  });
});

describe('--bwlimit timetable (rclone syntax)', () => {
  const at = (iso: string) => Date.parse(iso);

  test('a single rate, in KiB/s without a suffix, binary suffixes, off and 0', () => {
    const rate = (spec: string) => BandwidthTimetable.parse(spec, 'UTC').rateAt(0);
    expect(rate('10M')).toBe(10 * MiB);
    expect(rate('512k')).toBe(512 * KiB);
    expect(rate('666')).toBe(666 * KiB);
    expect(rate('1.5M')).toBe(1.5 * MiB);
    expect(rate('100B')).toBe(100);
    expect(rate('2Mi')).toBe(2 * MiB);
    expect(rate('2MiB')).toBe(2 * MiB);
    expect(rate('1G')).toBe(1024 * MiB);
    expect(rate('off')).toBeNull();
    expect(rate('0')).toBeNull();
    // rclone's upload:download pair: the lower one applies.
    expect(rate('10M:1M')).toBe(MiB);
    expect(rate('off:1M')).toBe(MiB);
    expect(rate('off:off')).toBeNull();
  });

  test('a daily timetable in its zone; before the first entry of the day the previous day\'s last one holds', () => {
    const t = BandwidthTimetable.parse('08:00,10M 12:00,off 19:00,512k', 'Europe/Berlin');
    // Winter: Berlin is UTC+1.
    expect(t.rateAt(at('2026-01-14T07:30:00Z'))).toBe(10 * MiB); // 08:30
    expect(t.rateAt(at('2026-01-14T06:59:00Z'))).toBe(512 * KiB); // 07:59: still yesterday's 19:00 entry
    expect(t.rateAt(at('2026-01-14T11:00:00Z'))).toBeNull(); // 12:00
    expect(t.rateAt(at('2026-01-14T18:00:00Z'))).toBe(512 * KiB); // 19:00
    // Summer: UTC+2.
    expect(t.rateAt(at('2026-07-14T06:30:00Z'))).toBe(10 * MiB); // 08:30
    // The same instants in another zone.
    const utc = BandwidthTimetable.parse('08:00,10M 12:00,off 19:00,512k', 'UTC');
    expect(utc.rateAt(at('2026-01-14T07:30:00Z'))).toBe(512 * KiB);
  });

  test('weekday entries and `;` as separator; the week wraps to its last entry', () => {
    const t = BandwidthTimetable.parse('Mon-08:00,1M;Fri-18:00,off; Sat-10:00,100k', 'UTC');
    // 2026-01-12 is a Monday.
    expect(t.rateAt(at('2026-01-12T07:59:00Z'))).toBe(100 * KiB); // Monday before 08:00: Saturday's entry
    expect(t.rateAt(at('2026-01-12T08:00:00Z'))).toBe(MiB);
    expect(t.rateAt(at('2026-01-14T12:00:00Z'))).toBe(MiB); // Wednesday
    expect(t.rateAt(at('2026-01-16T18:00:00Z'))).toBeNull(); // Friday 18:00
    expect(t.rateAt(at('2026-01-18T23:59:00Z'))).toBe(100 * KiB); // Sunday
    expect(BandwidthTimetable.parse('sunday-00:00,1M monday-00:00,2M', 'UTC').rateAt(at('2026-01-18T12:00:00Z'))).toBe(MiB);
  });

  test('bad specs say what is wrong', () => {
    const parse = (spec: string) => () => BandwidthTimetable.parse(spec, 'UTC');
    expect(parse('')).toThrow('empty bandwidth limit');
    expect(parse('10X')).toThrow('invalid bandwidth "10X"');
    expect(parse('10MB')).toThrow('invalid bandwidth "10MB"');
    expect(parse('-1M')).toThrow('invalid bandwidth "-1M"');
    expect(parse('24:00,1M')).toThrow('invalid time "24:00"');
    expect(parse('8:00,1M')).toThrow('invalid time "8:00"');
    expect(parse('08:00,1M,2M')).toThrow('invalid time/bandwidth entry "08:00,1M,2M"');
    expect(parse('Someday-08:00,1M')).toThrow('invalid weekday "Someday"');
    expect(parse('08:00,bad 12:00,off')).toThrow('invalid bandwidth "bad"');
    expect(parse('0.0001B')).toThrow('below 1 byte per second');
  });

  test('the agent-wide rate follows the clock, looked up once per minute', () => {
    const clock = manualClock(Date.parse('2026-01-14T11:59:00Z'));
    const agent = new AgentBandwidth(BandwidthTimetable.parse('08:00,10M 12:00,off', 'UTC'), clock.now);
    expect(agent.rateNow()).toBe(10 * MiB);
    clock.advance(59_999);
    expect(agent.rateNow()).toBe(10 * MiB);
    clock.advance(1);
    expect(agent.rateNow()).toBeNull();
    // Off now: the bucket passes everything.
    expect(agent.bucket.reserve(100 * MiB)).toBe(0);
  });
});

describe('pace', () => {
  const body = (bytes: number) => Readable.from([Buffer.alloc(bytes, 7)]);
  const drain = async (stream: Readable) => {
    let bytes = 0;
    for await (const chunk of stream as AsyncIterable<Buffer>) bytes += chunk.length;
    return bytes;
  };

  test('no limit and no timetable: the body itself, nothing added to the pipeline', () => {
    const source = body(10);
    expect(runPacer(undefined, null)(source, new AbortController().signal)).toBe(source);
  });

  test('a run limit or a timetable (even one that is off now): a paced stream carrying every byte', async () => {
    const limited = runPacer(1_000_000, null)(body(300_000), new AbortController().signal);
    expect(limited).toBeInstanceOf(PacedStream);
    expect(await drain(limited)).toBe(300_000);
    const off = new AgentBandwidth(BandwidthTimetable.parse('off', 'UTC'));
    const timed = runPacer(undefined, off)(body(300_000), new AbortController().signal);
    expect(timed).toBeInstanceOf(PacedStream);
    expect(await drain(timed)).toBe(300_000);
  });

  test('a chunk is let through in slices, the lower of the run\'s and the agent\'s rates deciding their size', async () => {
    const clock = manualClock();
    const agent = new AgentBandwidth(BandwidthTimetable.parse('20k', 'UTC'), clock.now);
    const paced = runPacer(10 * MiB, agent, clock.now)(body(4 * KiB), new AbortController().signal);
    const sizes: number[] = [];
    paced.on('data', (chunk: Buffer) => sizes.push(chunk.length));
    await new Promise((resolve) => paced.on('end', resolve));
    // 50 ms at 20 KiB/s is 1024 bytes (also the floor): the agent's rate, the lower one, cuts the 4 KiB chunk.
    expect(sizes).toEqual([1024, 1024, 1024, 1024]);
  });

  test('an error of the body comes out of the paced stream', async () => {
    const source = new PassThrough();
    const paced = runPacer(1_000_000, null)(source, new AbortController().signal);
    source.write(Buffer.alloc(100));
    source.destroy(new Error('source broke'));
    await expect(drain(paced)).rejects.toThrow('source broke');
  });

  test('an abort ends a wait at once with the abort reason, and destroys the body', async () => {
    const controller = new AbortController();
    const source = new PassThrough();
    // 1024 B/s: the second slice waits about a second; the abort comes first.
    const paced = runPacer(1024, null)(source, controller.signal);
    source.write(Buffer.alloc(4096));
    const first = await new Promise<Buffer>((resolve) => paced.once('data', resolve));
    expect(first.length).toBe(1024);
    const failed = new Promise<Error>((resolve) => paced.once('error', resolve));
    controller.abort(new Error('job cancelled'));
    expect((await failed).message).toBe('job cancelled');
    await new Promise((resolve) => setImmediate(resolve));
    expect(source.destroyed).toBe(true);
  });
});

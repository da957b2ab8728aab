import { pipeline, Transform, type Readable, type TransformCallback } from 'node:stream';
import { wallClock } from '../lib/zoned-time.js';

/**
 * Bandwidth limits (issue 25, docs/agent.md "Bandwidth limits and run windows"): a run's own
 * `options.bandwidth_limit` across all its streams, and the agent's timetable (`--bwlimit`, rclone's
 * syntax) across all its runs. A stream is paced by both; the lower one binds.
 */

/** Milliseconds since the epoch (injected in tests). */
export type Clock = () => number;

/** Bytes per second now; null: no limit now. */
export type RateNow = () => number | null;

/** How far ahead of its rate a bucket lets bytes go: an idle run starts with this much credit, no more. */
const BURST_MS = 100;
/** A chunk is paced in slices of at most this long at the current rate, so a rate change (timetable) applies within it. */
const SLICE_MS = 50;
const MIN_SLICE = 1024;

/**
 * A token bucket as a "theoretical arrival time" (GCRA): each reservation moves the time its
 * bytes are due by bytes/rate, and the caller waits until its bytes are due less the burst.
 * Reservations queue in call order, so the streams sharing a bucket take turns slice by slice.
 * It holds no timer and costs nothing while idle.
 */
export class TokenBucket {
  /** When the bytes reserved so far are due (ms); never behind the clock once used. */
  private due = 0;

  constructor(readonly rate: RateNow, private readonly clock: Clock = Date.now) {}

  /** Reserves `bytes`: the milliseconds to wait before passing them (0: now). With no limit now, 0 and no debt kept. */
  reserve(bytes: number): number {
    const rate = this.rate();
    const now = this.clock();
    if (rate === null) {
      this.due = now;
      return 0;
    }
    this.due = Math.max(this.due, now) + (bytes * 1000) / rate;
    return Math.max(0, this.due - now - BURST_MS);
  }
}

/** One entry of a timetable: from `minute` of the week (0 = Sunday 00:00) on, `rate` bytes/s (null: off). */
interface Slot {
  minute: number;
  rate: number | null;
}

const DAYS: Record<string, number> = {
  sun: 0, sunday: 0, mon: 1, monday: 1, tue: 2, tuesday: 2, wed: 3, wednesday: 3, thu: 4, thursday: 4, fri: 5, friday: 5, sat: 6, saturday: 6,
};
const MINUTES_PER_DAY = 24 * 60;

/**
 * rclone's `--bwlimit`: `10M` (all the time), or a timetable of `[Day-]HH:MM,RATE` entries separated
 * by spaces or `;` (`"08:00,10M 12:00,off 19:00,512k"`, `"Mon-08:00,1M Sat-00:00,off"`). An entry
 * without a day applies every day. RATE is a number of KiB/s, or with a suffix B, K, M, G, T, P
 * (binary: 1K = 1024 bytes; `Ki`, `KiB` also accepted), `off` or 0 for no limit; rclone's
 * `UPLOAD:DOWNLOAD` pair is accepted, and the lower of the two applies (every byte a run moves is
 * both read and written by the agent). Before the first entry of the week, the last one still holds.
 */
export class BandwidthTimetable {
  /** `spec` as given (logged at start). */
  private constructor(private readonly slots: Slot[], readonly tz: string, readonly spec: string) {}

  /** Throws an Error saying what is wrong with `text`. */
  static parse(text: string, tz: string): BandwidthTimetable {
    const spec = text.trim();
    if (spec === '') throw new Error('empty bandwidth limit');
    if (!/[\s,;]/.test(spec)) return new BandwidthTimetable([{ minute: 0, rate: parseRate(spec) }], tz, spec);
    const slots: Slot[] = [];
    for (const token of spec.split(/[\s;]+/).filter((t) => t !== '')) {
      const parts = token.split(',');
      if (parts.length !== 2) throw new Error(`invalid time/bandwidth entry "${token}" (expected [Day-]HH:MM,RATE)`);
      const [when, rateText] = parts as [string, string];
      const rate = parseRate(rateText);
      const dash = when.indexOf('-');
      const minute = parseHHMM(dash < 0 ? when : when.slice(dash + 1));
      if (dash < 0) {
        for (let day = 0; day < 7; day++) slots.push({ minute: day * MINUTES_PER_DAY + minute, rate });
      } else {
        const day = DAYS[when.slice(0, dash).toLowerCase()];
        if (day === undefined) throw new Error(`invalid weekday "${when.slice(0, dash)}" in "${token}"`);
        slots.push({ minute: day * MINUTES_PER_DAY + minute, rate });
      }
    }
    return new BandwidthTimetable(slots, tz, spec);
  }

  /** Bytes/s at the instant `ms` in the timetable's zone; null: no limit. */
  rateAt(ms: number): number | null {
    if (this.slots.length === 1) return this.slots[0]!.rate;
    const w = wallClock(ms, this.tz);
    const now = w.weekday * MINUTES_PER_DAY + w.hour * 60 + w.minute;
    // The latest entry at or before now; before the week's first one, the week's last (it wraps).
    // On a tie the later-written entry wins (as in rclone).
    let current: Slot | null = null;
    let last: Slot = this.slots[0]!;
    for (const slot of this.slots) {
      if (slot.minute >= last.minute) last = slot;
      if (slot.minute <= now && (current === null || slot.minute >= current.minute)) current = slot;
    }
    return (current ?? last).rate;
  }
}

function parseHHMM(text: string): number {
  const m = /^([01][0-9]|2[0-3]):([0-5][0-9])$/.exec(text);
  if (!m) throw new Error(`invalid time "${text}" (expected HH:MM, 00:00 to 23:59)`);
  return Number(m[1]) * 60 + Number(m[2]);
}

const MULTIPLIERS: Record<string, number> = { b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4, p: 1024 ** 5 };

/** One rate or an `UP:DOWN` pair (the lower applies); null: off. */
function parseRate(text: string): number | null {
  const pair = text.split(':');
  if (pair.length > 2) throw new Error(`invalid bandwidth "${text}"`);
  const rates = pair.map(parseSize).filter((r): r is number => r !== null);
  return rates.length === 0 ? null : Math.min(...rates);
}

function parseSize(text: string): number | null {
  if (text.toLowerCase() === 'off') return null;
  const m = /^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:([bkmgtp])|([kmgtp])i(b)?)?$/i.exec(text);
  if (!m) throw new Error(`invalid bandwidth "${text}" (a number with an optional suffix B, K, M, G, T or P, or off)`);
  const unit = (m[2] ?? m[3])?.toLowerCase();
  const bytes = Number(m[1]) * (unit ? MULTIPLIERS[unit]! : 1024);
  // rclone: 0 is no limit. Below 1 byte/s is no rate at all.
  if (bytes === 0) return null;
  if (bytes < 1) throw new Error(`bandwidth "${text}" is below 1 byte per second`);
  return Math.floor(bytes);
}

/**
 * The agent's limit: one bucket for every run of the agent, following the timetable. The rate is
 * looked up once per minute at most (Intl is not free, and every timetable entry is on a minute).
 */
export class AgentBandwidth {
  readonly bucket: TokenBucket;
  private minute = Number.NaN;
  private rate: number | null = null;

  constructor(readonly timetable: BandwidthTimetable, private readonly clock: Clock = Date.now) {
    this.bucket = new TokenBucket(() => this.rateNow(), clock);
  }

  rateNow(): number | null {
    const now = this.clock();
    const minute = Math.floor(now / 60_000);
    if (minute !== this.minute) {
      this.minute = minute;
      this.rate = this.timetable.rateAt(now);
    }
    return this.rate;
  }
}

/**
 * `RunLimits.pace` of one run: `runLimit` (bytes/s, options.bandwidth_limit) shared by its
 * streams, and the agent's timetable shared by all runs. With neither, `body` itself: no
 * pass-through in the pipeline. With a timetable, always paced, even while it says `off`: it may
 * turn on in the middle of a file.
 */
export function runPacer(runLimit: number | undefined, agent: AgentBandwidth | null, clock: Clock = Date.now): (body: Readable, signal: AbortSignal) => Readable {
  const buckets: TokenBucket[] = [];
  if (runLimit !== undefined) buckets.push(new TokenBucket(() => runLimit, clock));
  if (agent) buckets.push(agent.bucket);
  if (buckets.length === 0) return (body) => body;
  return (body, signal) => {
    const paced = new PacedStream(buckets, signal);
    // Errors of the body come out of the paced stream; destroying the paced stream destroys the body.
    pipeline(body, paced, () => undefined);
    return paced;
  };
}

/** Lets chunks through no faster than every bucket allows; stops waiting at once when the signal aborts. */
export class PacedStream extends Transform {
  private timer: NodeJS.Timeout | null = null;
  private waiting: TransformCallback | null = null;
  private readonly onAbort = () => this.abort();

  constructor(private readonly buckets: TokenBucket[], private readonly signal: AbortSignal) {
    super();
    signal.addEventListener('abort', this.onAbort, { once: true });
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.feed(chunk, 0, callback);
  }

  private feed(chunk: Buffer, offset: number, callback: TransformCallback): void {
    while (offset < chunk.length) {
      if (this.signal.aborted) {
        callback(abortReason(this.signal));
        return;
      }
      const piece = chunk.subarray(offset, offset + this.sliceSize(chunk.length - offset));
      offset += piece.length;
      let wait = 0;
      for (const b of this.buckets) wait = Math.max(wait, b.reserve(piece.length));
      if (wait > 0) {
        this.waiting = callback;
        this.timer = setTimeout(() => {
          this.timer = null;
          this.waiting = null;
          this.push(piece);
          this.feed(chunk, offset, callback);
        }, Math.ceil(wait));
        return;
      }
      this.push(piece);
    }
    callback();
  }

  /** At most SLICE_MS worth of bytes at the lowest current rate. */
  private sliceSize(left: number): number {
    let rate: number | null = null;
    for (const b of this.buckets) {
      const r = b.rate();
      if (r !== null && (rate === null || r < rate)) rate = r;
    }
    return rate === null ? left : Math.max(MIN_SLICE, Math.floor((rate * SLICE_MS) / 1000));
  }

  private abort(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const callback = this.waiting;
    this.waiting = null;
    callback?.(abortReason(this.signal));
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.waiting = null;
    this.signal.removeEventListener('abort', this.onAbort);
    callback(err);
  }
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted');
}

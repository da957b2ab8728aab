/**
 * Rates and remaining time of long work (transfers, uploads, downloads), computed the same way
 * for the live ink view and the plain progress lines.
 */

/** A rate over a sliding window of samples: steady under bursty reports, quick to follow real changes. */
export class RateMeter {
  private readonly samples: Array<{ t: number; value: number }> = [];

  constructor(private readonly windowMs = 10_000) {}

  /** Records the running total `value` (bytes or files done) at time `t`. */
  sample(value: number, t = Date.now()): void {
    const last = this.samples.at(-1);
    if (last && last.t === t) last.value = value;
    else this.samples.push({ t, value });
    // Keep one sample older than the window so the rate spans the whole window.
    while (this.samples.length > 2 && this.samples[1]!.t <= t - this.windowMs) this.samples.shift();
  }

  /** Units per second; undefined until two samples at least 250 ms apart exist. */
  rate(): number | undefined {
    const first = this.samples[0];
    const last = this.samples.at(-1);
    if (!first || !last || last.t - first.t < 250) return undefined;
    return Math.max(0, (last.value - first.value) / ((last.t - first.t) / 1000));
  }
}

/** What a progress display shows: totals may be unknown (a transfer still walking its source). */
export interface ProgressInput {
  label: string;
  /** e.g. a transfer's status; shown after the label. */
  state?: string;
  bytes: number;
  bytesTotal?: number;
  files?: number;
  filesTotal?: number;
}

/** ProgressInput plus what is derived from its history. */
export interface ProgressSnapshot extends ProgressInput {
  /** Bytes per second. */
  rate: number | undefined;
  etaSeconds: number | undefined;
  /** 0..1 when a total is known. */
  fraction: number | undefined;
  elapsedSeconds: number;
}

/** Turns successive ProgressInputs into snapshots with rate, ETA and fraction. */
export class ProgressTracker {
  private readonly bytes = new RateMeter();
  private readonly files = new RateMeter();
  private readonly started: number;

  constructor(private readonly now: () => number = Date.now) {
    this.started = now();
  }

  snapshot(input: ProgressInput): ProgressSnapshot {
    const t = this.now();
    this.bytes.sample(input.bytes, t);
    if (input.files !== undefined) this.files.sample(input.files, t);
    const rate = this.bytes.rate();
    let fraction: number | undefined;
    let etaSeconds: number | undefined;
    if (input.bytesTotal !== undefined && input.bytesTotal > 0) {
      fraction = Math.min(1, input.bytes / input.bytesTotal);
      if (rate) etaSeconds = Math.max(0, (input.bytesTotal - input.bytes) / rate);
    } else if (input.filesTotal !== undefined && input.filesTotal > 0 && input.files !== undefined) {
      // Bytes of the whole job are unknown (a transfer learns them file by file): go by files.
      fraction = Math.min(1, input.files / input.filesTotal);
      const fileRate = this.files.rate();
      if (fileRate) etaSeconds = Math.max(0, (input.filesTotal - input.files) / fileRate);
    }
    return { ...input, rate, etaSeconds, fraction, elapsedSeconds: (t - this.started) / 1000 };
  }
}

const UNITS = ['B', 'kB', 'MB', 'GB', 'TB', 'PB'];

/** Decimal units, like rclone and curl: 1 MB = 1,000,000 bytes. */
export function formatBytes(n: number): string {
  let value = n;
  let unit = 0;
  while (value >= 1000 && unit < UNITS.length - 1) { value /= 1000; unit++; }
  return unit === 0 ? `${n} B` : `${value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0)} ${UNITS[unit]}`;
}

/** `m:ss`, or `h:mm:ss` from an hour on. */
export function formatDuration(seconds: number): string {
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return h > 0 ? `${h}:${String(m).padStart(2, '0')}:${ss}` : `${m}:${ss}`;
}

/** The parts of a progress line, shared by the ink view and the plain lines. */
export function progressParts(p: ProgressSnapshot): string[] {
  const parts: string[] = [];
  if (p.files !== undefined) parts.push(`${p.files}${p.filesTotal !== undefined ? `/${p.filesTotal}` : ''} files`);
  parts.push(p.bytesTotal !== undefined ? `${formatBytes(p.bytes)} / ${formatBytes(p.bytesTotal)}` : formatBytes(p.bytes));
  if (p.rate !== undefined) parts.push(`${formatBytes(Math.round(p.rate))}/s`);
  if (p.etaSeconds !== undefined && p.fraction !== undefined && p.fraction < 1) parts.push(`ETA ${formatDuration(p.etaSeconds)}`);
  return parts;
}

/** One plain line: `label [state] 45% 12/40 files, 150 MB, 25.1 MB/s, ETA 0:12`. */
export function plainLine(p: ProgressSnapshot): string {
  const head = [p.label, p.state && `[${p.state}]`, p.fraction !== undefined && `${Math.floor(p.fraction * 100)}%`].filter(Boolean).join(' ');
  return `${head}: ${progressParts(p).join(', ')}`;
}

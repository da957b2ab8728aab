import { Flags } from '@oclif/core';
import { plainLine, ProgressTracker, type ProgressInput, type ProgressSnapshot } from './meter.js';
export { writeLine } from './live.js';

/**
 * How long work shows its progress, always on stderr so that stdout stays the command's result:
 * - `tty`: a live ink view redrawn in place (stderr is a terminal);
 * - `plain`: a line every few seconds and one at the end (CI logs, pipes);
 * - `none`: nothing (`--quiet`, or `--json` without a terminal: a script reads the result).
 */
export type ProgressMode = 'tty' | 'plain' | 'none';

export function progressMode(flags: { json?: boolean; quiet?: boolean }, stream: NodeJS.WriteStream = process.stderr): ProgressMode {
  if (flags.quiet) return 'none';
  if (stream.isTTY) return 'tty';
  return flags.json ? 'none' : 'plain';
}

export interface ProgressDisplay {
  update(input: ProgressInput): void;
  /** Draws the last state once more and releases the terminal. */
  stop(): void;
}

class PlainProgress implements ProgressDisplay {
  private readonly tracker = new ProgressTracker();
  private last: ProgressSnapshot | undefined;
  private lastWritten = 0;
  private lastLine = '';

  constructor(private readonly stream: NodeJS.WriteStream, private readonly intervalMs: number) {}

  update(input: ProgressInput): void {
    this.last = this.tracker.snapshot(input);
    const now = Date.now();
    if (now - this.lastWritten >= this.intervalMs) this.write(now);
  }

  stop(): void {
    if (this.last) this.write(Date.now());
  }

  private write(now: number): void {
    const line = plainLine(this.last!);
    if (line === this.lastLine) return;
    this.lastLine = line;
    this.lastWritten = now;
    this.stream.write(line + '\n');
  }
}

const NONE: ProgressDisplay = { update() {}, stop() {} };

/** `XFER_PROGRESS_INTERVAL_MS` sets the plain lines' interval (default 5 s). */
export async function createProgress(mode: ProgressMode, stream: NodeJS.WriteStream = process.stderr): Promise<ProgressDisplay> {
  // ink and React take ~0.4 s to load: only a terminal that shows the live view pays for them.
  if (mode === 'tty') return new (await import('./ink-view.js')).InkProgress(stream);
  if (mode === 'plain') return new PlainProgress(stream, Number(process.env.XFER_PROGRESS_INTERVAL_MS) || 5000);
  return NONE;
}

/** The flag of every command that shows progress. */
export const progressFlags = {
  quiet: Flags.boolean({ char: 'q', description: 'Show no progress (it goes to stderr: a live view on a terminal, else a line every 5 s)' }),
};

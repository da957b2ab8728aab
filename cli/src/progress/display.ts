import { Flags } from '@oclif/core';
import { createElement as h, Fragment, type ReactElement } from 'react';
import { Box, render, Static, Text, type Instance } from 'ink';
import { plainLine, progressParts, ProgressTracker, type ProgressInput, type ProgressSnapshot } from './meter.js';

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

const BAR_WIDTH = 24;

/** The live view: label and state, a bar when a total is known, then files, bytes, rate, ETA. */
export function ProgressView({ p }: { p: ProgressSnapshot }): ReactElement {
  const filled = p.fraction === undefined ? 0 : Math.round(p.fraction * BAR_WIDTH);
  const state = p.state ? h(Text, { color: p.state === 'failed' ? 'red' : p.state === 'completed' ? 'green' : 'cyan' }, ` ${p.state}`) : null;
  const bar = p.fraction === undefined ? null
    : h(Text, null, ' ', h(Text, { color: 'green' }, '█'.repeat(filled)), h(Text, { dimColor: true }, '░'.repeat(BAR_WIDTH - filled)), ` ${Math.floor(p.fraction * 100)}%`);
  // One line of text, cut at the terminal's width rather than wrapped, so redraws stay in place.
  return h(Box, null, h(Text, { wrap: 'truncate-end' }, h(Text, { bold: true }, p.label), state, bar, `  ${progressParts(p).join('  ')}`));
}

/** The live view on screen, if any: lines written meanwhile must go above it (`writeLine`). */
let live: InkProgress | undefined;

class InkProgress implements ProgressDisplay {
  private readonly tracker = new ProgressTracker();
  private instance: Instance | undefined;
  private snapshot: ProgressSnapshot | undefined;
  /** Lines written while the view is up: ink's Static prints each once, above the view. */
  private readonly lines: string[] = [];

  constructor(private readonly stream: NodeJS.WriteStream) {}

  update(input: ProgressInput): void {
    this.snapshot = this.tracker.snapshot(input);
    this.draw();
    live = this;
  }

  interject(line: string): void {
    this.lines.push(line);
    this.draw();
  }

  stop(): void {
    this.instance?.unmount();
    this.instance = undefined;
    if (live === this) live = undefined;
  }

  private draw(): void {
    const view = h(Fragment, null,
      h(Static<string>, { items: [...this.lines], children: (line: string, i: number) => h(Text, { key: i }, line) }),
      this.snapshot ? h(ProgressView, { p: this.snapshot }) : null);
    if (this.instance) this.instance.rerender(view);
    // Ctrl-C stays a signal for the command (transfers run cancels on it), not ink's to handle.
    else this.instance = render(view, { stdout: this.stream, stderr: this.stream, exitOnCtrlC: false, patchConsole: false });
  }
}

/**
 * A line for people on stderr (a warning, a notice) that does not tear the live view: ink redraws
 * by erasing the lines it drew last, so a line written behind its back would be half erased.
 * While a view is up, the line is printed above it by ink itself.
 */
export function writeLine(line: string, stream: NodeJS.WriteStream = process.stderr): void {
  if (live) live.interject(line);
  else stream.write(line + '\n');
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
export function createProgress(mode: ProgressMode, stream: NodeJS.WriteStream = process.stderr): ProgressDisplay {
  if (mode === 'tty') return new InkProgress(stream);
  if (mode === 'plain') return new PlainProgress(stream, Number(process.env.XFER_PROGRESS_INTERVAL_MS) || 5000);
  return NONE;
}

/** The flag of every command that shows progress. */
export const progressFlags = {
  quiet: Flags.boolean({ char: 'q', description: 'Show no progress (it goes to stderr: a live view on a terminal, else a line every 5 s)' }),
};

import { createElement as h, Fragment, type ReactElement } from 'react';
import { Box, render, Static, Text, type Instance } from 'ink';
import type { ProgressDisplay } from './display.js';
import { setLive } from './live.js';
import { progressParts, ProgressTracker, type ProgressInput, type ProgressSnapshot } from './meter.js';

/** The live progress view on a terminal (ink): loaded only when one is shown (see createProgress). */

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

export class InkProgress implements ProgressDisplay {
  private readonly tracker = new ProgressTracker();
  private instance: Instance | undefined;
  private snapshot: ProgressSnapshot | undefined;
  /** Lines written while the view is up: ink's Static prints each once, above the view. */
  private readonly lines: string[] = [];

  constructor(private readonly stream: NodeJS.WriteStream) {}

  update(input: ProgressInput): void {
    this.snapshot = this.tracker.snapshot(input);
    this.draw();
    setLive(this);
  }

  interject(line: string): void {
    this.lines.push(line);
    this.draw();
  }

  stop(): void {
    this.instance?.unmount();
    this.instance = undefined;
    setLive(undefined, this);
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

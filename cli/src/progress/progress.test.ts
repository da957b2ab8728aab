import { PassThrough } from 'node:stream';
import { renderToString } from 'ink';
import { createElement } from 'react';
import { createProgress, progressMode, writeLine } from './display.js';
import { formatBytes, formatDuration, plainLine, ProgressTracker, RateMeter } from './meter.js';

test('RateMeter: rate over the window, undefined until samples span 250 ms', () => {
  const m = new RateMeter(10_000);
  m.sample(0, 1000);
  expect(m.rate()).toBeUndefined();
  m.sample(1_000_000, 1100);
  expect(m.rate()).toBeUndefined();
  m.sample(5_000_000, 3000);
  expect(m.rate()).toBeCloseTo(2_500_000);
  // Samples older than the window leave it, except the last one before it (the window's start).
  m.sample(5_000_000, 12_000);
  m.sample(5_000_000, 20_000);
  m.sample(6_000_000, 22_000);
  expect(m.rate()).toBeCloseTo(1_000_000 / 10);
});

test('ProgressTracker: fraction and ETA from bytes when the total is known, else from files', () => {
  let now = 0;
  const t = new ProgressTracker(() => now);
  t.snapshot({ label: 'up', bytes: 0, bytesTotal: 10_000_000 });
  now = 2000;
  const s = t.snapshot({ label: 'up', bytes: 4_000_000, bytesTotal: 10_000_000 });
  expect(s.fraction).toBeCloseTo(0.4);
  expect(s.rate).toBeCloseTo(2_000_000);
  expect(s.etaSeconds).toBeCloseTo(3);
  expect(plainLine(s)).toBe('up 40%: 4.00 MB / 10.0 MB, 2.00 MB/s, ETA 0:03');

  now = 0;
  const files = new ProgressTracker(() => now);
  files.snapshot({ label: 'job', state: 'in-progress', bytes: 0, files: 0, filesTotal: 40 });
  now = 10_000;
  const f = files.snapshot({ label: 'job', state: 'in-progress', bytes: 150_300_000, files: 10, filesTotal: 40 });
  expect(f.fraction).toBeCloseTo(0.25);
  expect(f.etaSeconds).toBeCloseTo(30);
  expect(plainLine(f)).toBe('job [in-progress] 25%: 10/40 files, 150 MB, 15.0 MB/s, ETA 0:30');
});

test('formatting', () => {
  expect(formatBytes(0)).toBe('0 B');
  expect(formatBytes(999)).toBe('999 B');
  expect(formatBytes(2_147_483_648)).toBe('2.15 GB');
  expect(formatDuration(59.6)).toBe('1:00');
  expect(formatDuration(3725)).toBe('1:02:05');
});

test('progressMode: ink on a terminal, plain lines otherwise, none for --quiet or --json in a pipe', () => {
  const tty = { isTTY: true } as NodeJS.WriteStream;
  const pipe = { isTTY: false } as NodeJS.WriteStream;
  expect(progressMode({}, tty)).toBe('tty');
  expect(progressMode({ json: true }, tty)).toBe('tty');
  expect(progressMode({}, pipe)).toBe('plain');
  expect(progressMode({ json: true }, pipe)).toBe('none');
  expect(progressMode({ quiet: true }, tty)).toBe('none');
});

test('plain progress writes at most one line per interval, and the last state on stop', async () => {
  const out = new PassThrough();
  let text = '';
  out.on('data', (d: Buffer) => (text += d.toString()));
  const p = await createProgress('plain', out as unknown as NodeJS.WriteStream);
  p.update({ label: 'f', bytes: 1, bytesTotal: 100 });
  p.update({ label: 'f', bytes: 50, bytesTotal: 100 });
  p.update({ label: 'f', bytes: 100, bytesTotal: 100 });
  p.stop();
  expect(text.split('\n').filter(Boolean)).toEqual(['f 1%: 1 B / 100 B', 'f 100%: 100 B / 100 B']);
});

test('the ink view shows the label, state, a bar and the figures', async () => {
  const { ProgressView } = await import('./ink-view.js');
  const view = renderToString(createElement(ProgressView, {
    p: { label: 'nightly', state: 'in-progress', bytes: 5_000_000, files: 3, filesTotal: 6, rate: 1_000_000, etaSeconds: 4, fraction: 0.5, elapsedSeconds: 5 },
  }), { columns: 200 });
  expect(view).toContain('nightly');
  expect(view).toContain('in-progress');
  expect(view).toContain('█'.repeat(12) + '░'.repeat(12));
  expect(view).toContain('50%');
  expect(view).toContain('3/6 files');
  expect(view).toContain('1.00 MB/s');
  expect(view).toContain('ETA 0:04');
});

test('a line written while the live view is up goes above it, and the view is drawn again', async () => {
  const out = Object.assign(new PassThrough(), { isTTY: true, columns: 120, rows: 40 });
  let text = '';
  out.on('data', (d: Buffer) => (text += d.toString()));
  const p = await createProgress('tty', out as unknown as NodeJS.WriteStream);
  p.update({ label: 'job', bytes: 10, bytesTotal: 100 });
  await new Promise((r) => setTimeout(r, 50));
  const before = text.length;
  writeLine('Warning: server busy (retrying in 1 s, attempt 2 of 5)', out as unknown as NodeJS.WriteStream);
  await new Promise((r) => setTimeout(r, 50));
  p.stop();
  const after = text.slice(before);
  const warning = after.indexOf('Warning: server busy');
  expect(warning).toBeGreaterThanOrEqual(0);
  // The view comes back below the line.
  expect(after.indexOf('job', warning)).toBeGreaterThan(warning);
  // Once the view is gone, lines go straight to the stream.
  text = '';
  writeLine('plain', out as unknown as NodeJS.WriteStream);
  expect(text).toBe('plain\n');
});

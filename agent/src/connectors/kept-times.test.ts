import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { openKeptTimes, type KeptTimes } from './kept-times.js';

describe('kept modification times index', () => {
  let dir: string;
  const opened: KeptTimes[] = [];
  const open = (d = dir): KeptTimes => {
    const index = openKeptTimes(d);
    if (!index) throw new Error('the index did not open');
    opened.push(index);
    return index;
  };
  const mtime = new Date('1999-03-04T05:06:07.891Z');
  const written = new Date('2026-11-29T10:00:00.000Z');

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kept-times-'));
  });
  afterEach(() => {
    for (const index of opened.splice(0)) index.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('knows an object by size, ETag and write time (seconds), and nothing else', () => {
    const index = open();
    index.record('s3 a', 'k', { size: 5, etag: '"e1"', lastModified: written, mtime });
    expect(index.lookup('s3 a', 'k', { size: 5, etag: '"e1"', lastModified: new Date(written.getTime() + 999) })).toEqual(mtime);
    expect(index.lookup('s3 a', 'k', { size: 6, etag: '"e1"', lastModified: written })).toBeUndefined();
    expect(index.lookup('s3 a', 'k', { size: 5, etag: '"e2"', lastModified: written })).toBeUndefined();
    expect(index.lookup('s3 a', 'k', { size: 5, etag: '"e1"', lastModified: new Date(written.getTime() + 1000) })).toBeUndefined();
    expect(index.lookup('s3 a', 'k', { size: 5, etag: '"e1"' })).toBeUndefined();
    // Another bucket or store, another key: unknown.
    expect(index.lookup('s3 b', 'k', { size: 5, etag: '"e1"', lastModified: written })).toBeUndefined();
    expect(index.lookup('s3 a', 'k2', { size: 5, etag: '"e1"', lastModified: written })).toBeUndefined();
    index.forget('s3 a', 'k');
    expect(index.lookup('s3 a', 'k', { size: 5, etag: '"e1"', lastModified: written })).toBeUndefined();
  });

  it("takes the write time of the agent's own write from the first listing that shows it, then holds to it", () => {
    const index = open();
    index.record('s3 a', 'k', { size: 5, etag: '"e1"', mtime });
    expect(index.lookup('s3 a', 'k', { size: 5, etag: '"e1"', lastModified: written })).toEqual(mtime);
    const later = new Date(written.getTime() + 5000);
    expect(index.lookup('s3 a', 'k', { size: 5, etag: '"e1"', lastModified: later })).toBeUndefined();
    expect(index.lookup('s3 a', 'k', { size: 5, etag: '"e1"', lastModified: written })).toEqual(mtime);
    // A stat's record replaces it (the object rewritten, its kept time read).
    const other = new Date('2001-01-01T00:00:00.000Z');
    index.record('s3 a', 'k', { size: 5, etag: '"e1"', lastModified: later, mtime: other });
    expect(index.lookup('s3 a', 'k', { size: 5, etag: '"e1"', lastModified: later })).toEqual(other);
  });

  it('is kept on disk and shared by agents of one state directory', () => {
    const first = open();
    const second = open();
    first.record('s3 a', 'k', { size: 1, etag: 'x', lastModified: written, mtime });
    // Committed in batches: by a lookup of its own, a timer, or closing.
    expect(first.lookup('s3 a', 'k', { size: 1, etag: 'x', lastModified: written })).toEqual(mtime);
    expect(second.lookup('s3 a', 'k', { size: 1, etag: 'x', lastModified: written })).toEqual(mtime);
    second.record('s3 a', 'k2', { size: 2, etag: 'y', mtime });
    first.close();
    second.close();
    const third = open();
    expect(third.lookup('s3 a', 'k', { size: 1, etag: 'x', lastModified: written })).toEqual(mtime);
    expect(third.lookup('s3 a', 'k2', { size: 2, etag: 'y', lastModified: written })).toEqual(mtime);
  });

  it('agents writing at once (processes of one machine sharing the state directory) all keep their rows', async () => {
    // The built module (the suite runs after the build, as the other tests' real binaries do).
    const module = new URL('./kept-times.js', import.meta.url).href.replace('/agent/src/', '/agent/dist/');
    // Each process records 3,000 rows in batches while the other does the same.
    const script = `const { openKeptTimes } = await import(${JSON.stringify(module)});
      const index = openKeptTimes(process.argv[1]);
      if (!index) process.exit(3);
      for (let i = 0; i < 3000; i++) index.record('s3 shared', process.argv[2] + i, { size: i, etag: 'e', mtime: new Date(i) });
      index.close();`;
    const run = (name: string) => promisify(execFile)(process.execPath, ['--no-warnings', '--input-type=module', '-e', script, dir, name]);
    await Promise.all([run('a/'), run('b/')]);
    const index = open();
    for (const name of ['a/', 'b/']) {
      for (const i of [0, 1234, 2999]) expect(index.lookup('s3 shared', `${name}${i}`, { size: i, etag: 'e', lastModified: written })).toEqual(new Date(i));
    }
  });

  it('a state directory it cannot use leaves the agent without it; a damaged file is replaced by an empty index', () => {
    const lines: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void lines.push(line) });
    const file = join(dir, 'a-file');
    writeFileSync(file, 'x');
    expect(openKeptTimes(join(file, 'state'), log)).toBeNull();
    expect(lines.join('')).toMatch(/kept modification times index unavailable/);

    const damaged = join(dir, 'damaged');
    const index = open(damaged);
    index.close();
    writeFileSync(join(damaged, 'kept-times.sqlite'), Buffer.alloc(8192, 7));
    lines.length = 0;
    const fresh = openKeptTimes(damaged, log);
    if (fresh) opened.push(fresh);
    expect(lines.join('')).toMatch(/not a database.*kept modification times index damaged: starting an empty one/);
    expect(fresh?.lookup('s3 a', 'k', { size: 1, etag: 'x', lastModified: written })).toBeUndefined();
    fresh?.record('s3 a', 'k', { size: 1, etag: 'x', lastModified: written, mtime });
    expect(fresh?.lookup('s3 a', 'k', { size: 1, etag: 'x', lastModified: written })).toEqual(mtime);
  });
});

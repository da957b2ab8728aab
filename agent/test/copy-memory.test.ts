import { closeSync, ftruncateSync, mkdirSync, openSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { copyTree } from '../src/copy/copy-engine.js';
import { fsConnector, options, rmTemp, tempDir } from './helpers/tree.js';

/**
 * Memory stays flat whatever the number of files and whatever their size. Figures are printed
 * (no speed is asserted: that belongs to bench/); the bounds asserted are generous multiples of
 * what a streaming engine needs and far below what buffering would take.
 */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const MiB = 1024 * 1024;

let src: string;
let dst: string;
beforeEach(() => {
  src = tempDir('xfer-memsrc-');
  dst = tempDir('xfer-memdst-');
});
afterEach(() => {
  rmTemp(src);
  rmTemp(dst);
});

test('10,000 small files: the heap retained after the first 1,000 files does not grow with the rest', async () => {
  const FILES = 10_000;
  for (let d = 0; d < 100; d++) {
    mkdirSync(join(src, `dir-${d}`));
    for (let f = 0; f < FILES / 100; f++) writeFileSync(join(src, `dir-${d}`, `file-${f}.txt`), `content of ${d}/${f}\n`);
  }
  const retained: Record<number, number> = {};
  let done = 0;
  let peakRss = 0;
  const outcome = await copyTree({
    source: fsConnector(src), sourcePath: '/', destination: fsConnector(dst), destinationPath: '/copy',
    options: options({ concurrency: 16 }), resume: false, signal: new AbortController().signal,
    observer: {
      fileDone: () => {
        done++;
        if (done % 1000 === 0) peakRss = Math.max(peakRss, process.memoryUsage().rss);
        if (done === 1_000 || done === 9_000) {
          gc();
          retained[done] = process.memoryUsage().heapUsed;
        }
      },
    },
  });
  expect(outcome.status).toBe('completed');
  expect(outcome.counters.files_transferred).toBe(FILES);
  const growth = retained[9_000]! - retained[1_000]!;
  process.stdout.write(
    `copy-memory: ${FILES} files: retained heap ${(retained[1_000]! / MiB).toFixed(1)} MiB after 1,000 files, ` +
    `${(retained[9_000]! / MiB).toFixed(1)} MiB after 9,000 (growth ${(growth / MiB).toFixed(2)} MiB); peak RSS ${(peakRss / MiB).toFixed(0)} MiB\n`,
  );
  // 8,000 more files: a leak of even 700 bytes per file would show as 5 MiB.
  expect(growth).toBeLessThan(5 * MiB);
}, 180_000);

test('one 1 GiB (sparse) file: RSS stays within a few MiB of streaming buffers', async () => {
  const size = 1024 * MiB;
  const fd = openSync(join(src, 'disk.img'), 'w');
  ftruncateSync(fd, size);
  closeSync(fd);
  gc();
  const before = process.memoryUsage();
  let peakRss = before.rss;
  let peakHeap = before.heapUsed;
  let calls = 0;
  const outcome = await copyTree({
    source: fsConnector(src), sourcePath: '/disk.img', destination: fsConnector(dst), destinationPath: '/',
    options: options({ verify: 'checksum' }), resume: false, signal: new AbortController().signal,
    observer: {
      changed: () => {
        if (++calls % 256 !== 0) return;
        const now = process.memoryUsage();
        peakRss = Math.max(peakRss, now.rss);
        peakHeap = Math.max(peakHeap, now.heapUsed);
      },
    },
  });
  expect(outcome.status).toBe('completed');
  expect(statSync(join(dst, 'disk.img')).size).toBe(size);
  const rssGrowth = peakRss - before.rss;
  process.stdout.write(
    `copy-memory: 1 GiB file (hashed in flight, written, re-read to verify): peak RSS +${(rssGrowth / MiB).toFixed(1)} MiB, ` +
    `peak heap +${((peakHeap - before.heapUsed) / MiB).toFixed(1)} MiB\n`,
  );
  expect(rssGrowth).toBeLessThan(128 * MiB);
}, 300_000);

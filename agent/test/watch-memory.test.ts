import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { FolderWatch } from '../src/watch/index.js';
import { SftpWatchStore } from './helpers/watch-stores.js';

/**
 * A watcher's memory does not grow from poll to poll of a large folder: a 10,000-file folder on
 * the real sftp server, listed again and again while files change and arrive. Figures are printed
 * (speed belongs to bench/); the bound asserted is far below what keeping the listing would take.
 */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const MiB = 1024 * 1024;
const FILES = 10_000;

/** The JS heap and the memory of ArrayBuffers (where the watcher's typed arrays live). */
function retainedNow(): number {
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
}

let store: SftpWatchStore;
beforeAll(() => {
  store = new SftpWatchStore();
  for (let i = 0; i < FILES; i++) writeFileSync(join(store.dir, `file-${String(i).padStart(5, '0')}-with-a-long-ish-name-as-exports-have.csv`), `row ${i}\n`);
});
afterAll(async () => {
  await store.cleanup();
});

test('10,000 files polled 10 times with changes: the retained heap stays flat', async () => {
  const watch = new FolderWatch({ path: '', pattern: '*.csv', recursive: false, stable_seconds: 0, include_existing: false });
  let reported = 0;
  const poll = () => watch.poll(store.connector, { report: () => void reported++ });

  // Warm the connector's session and the code of a poll on a folder of its own.
  const warm = new FolderWatch({ path: '', pattern: 'none', recursive: false, stable_seconds: 0, include_existing: false });
  await warm.poll(store.connector, { report: () => undefined });
  gc();
  const empty = retainedNow();
  const baseline = await poll();
  expect(baseline).toMatchObject({ listed: FILES, matched: FILES, reported: 0 });
  await poll();
  gc();
  const start = retainedNow();
  const retained: number[] = [];
  let peakRss = 0;
  let added = 0;
  for (let round = 0; round < 10; round++) {
    // 100 files grow (new versions) and 10 arrive before each poll.
    for (let i = 0; i < 100; i++) appendFileSync(join(store.dir, `file-${String(round * 100 + i).padStart(5, '0')}-with-a-long-ish-name-as-exports-have.csv`), 'more\n');
    for (let i = 0; i < 10; i++) writeFileSync(join(store.dir, `new-${round}-${i}.csv`), 'new\n');
    added += 10;
    reported = 0;
    const summary = await poll();
    expect(summary).toMatchObject({ listed: FILES + added, reported: 110, waiting: 0, removed: 0 });
    expect(reported).toBe(110);
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    gc();
    retained.push(retainedNow());
  }
  const growth = Math.max(...retained) - start;
  const last = await poll();
  const known = start - empty;
  process.stdout.write(
    `watch-memory: the baseline of ${FILES} files retained ${(known / MiB).toFixed(2)} MiB; ` +
    `${FILES + added} files, 10 polls: retained heap+buffers ${(start / MiB).toFixed(1)} MiB before, at most ` +
    `${(Math.max(...retained) / MiB).toFixed(1)} MiB after (growth ${(growth / MiB).toFixed(2)} MiB); watcher state ${(last.state_bytes / 1024).toFixed(0)} KiB; peak RSS ${(peakRss / MiB).toFixed(0)} MiB\n`,
  );
  // The watcher's table for 10,100 files is 16,384 slots of 32 bytes.
  expect(last.state_bytes).toBe(16_384 * 32);
  // What the watcher keeps of 10,000 files is its table, not their paths (those alone are 0.6 MB of text).
  expect(known).toBeLessThan(1 * MiB);
  // Keeping each poll's listing (10,000 entries with their paths) would add several MiB a poll.
  expect(growth).toBeLessThan(2 * MiB);
}, 300_000);

import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { FolderWatch } from '../src/watch/index.js';
import { S3WatchStore, SftpWatchStore, type WatchStore } from './helpers/watch-stores.js';

/**
 * A watcher's memory does not grow from poll to poll of a large folder: a 10,000-file folder on
 * the real sftp and S3 servers, listed again and again while files change and arrive. Figures are
 * printed (speed belongs to bench/); the bounds asserted are far below what keeping the listing
 * would take.
 */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const MiB = 1024 * 1024;
const FILES = 10_000;

/**
 * The JS heap, where paths and entries would be kept. The watcher's typed arrays live outside it
 * (ArrayBuffers, whose total the HTTP and SSH clients' socket buffers make move by a MiB or so from
 * poll to poll): their size is asserted exactly, through `state_bytes`.
 */
function retainedNow(): number {
  return process.memoryUsage().heapUsed;
}

const fileName = (i: number) => `file-${String(i).padStart(5, '0')}-with-a-long-ish-name-as-exports-have.csv`;

/** Runs `fn` over 0..n-1, `width` at a time. */
async function eachLimited(n: number, width: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < n) await fn(next++);
  }));
}

describe.each([
  ['sftp', async (): Promise<WatchStore> => new SftpWatchStore()],
  ['s3', async (): Promise<WatchStore> => S3WatchStore.create()],
])('folder watch memory on %s', (type, makeStore) => {
  let store: WatchStore;
  beforeAll(async () => {
    store = await makeStore();
    await eachLimited(FILES, 16, (i) => store.put(fileName(i), `row ${i}\n`));
  }, 300_000);
  afterAll(async () => {
    await store.cleanup();
  }, 120_000);

  test('10,000 files polled 10 times with changes: the retained heap stays flat', async () => {
    const watch = new FolderWatch({ path: '', pattern: '*.csv', recursive: false, stable_seconds: 0, include_existing: false });
    let reported = 0;
    const poll = () => watch.poll(store.connector, { report: () => void reported++ });

    // Warm the connector's session and the code of a poll with a watch of its own.
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
    let slowest = 0;
    let added = 0;
    for (let round = 0; round < 10; round++) {
      // 100 files change (a longer content: a new version on every store) and 10 arrive before each poll.
      await eachLimited(100, 16, (i) => store.put(fileName(round * 100 + i), `row ${round * 100 + i}\nmore\n`));
      await eachLimited(10, 10, (i) => store.put(`new-${round}-${i}.csv`, 'new\n'));
      added += 10;
      reported = 0;
      const began = performance.now();
      const summary = await poll();
      slowest = Math.max(slowest, performance.now() - began);
      expect(summary).toMatchObject({ listed: FILES + added, reported: 110, waiting: 0, removed: 0 });
      expect(reported).toBe(110);
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
      gc();
      retained.push(retainedNow());
    }
    const growth = Math.max(...retained) - start;
    const known = start - empty;
    const last = await poll();
    process.stdout.write(
      `watch-memory ${type}: the baseline of ${FILES} files retained ${(known / MiB).toFixed(2)} MiB; ` +
      `${FILES + added} files, 10 polls: retained heap ${(start / MiB).toFixed(1)} MiB before, at most ` +
      `${(Math.max(...retained) / MiB).toFixed(1)} MiB after (growth ${(growth / MiB).toFixed(2)} MiB); ` +
      `series ${retained.map((r) => ((r - start) / MiB).toFixed(2)).join(' ')}; watcher state ${(last.state_bytes / 1024).toFixed(0)} KiB; slowest poll ${slowest.toFixed(0)} ms; peak RSS ${(peakRss / MiB).toFixed(0)} MiB\n`,
    );
    // The watcher's table for 10,100 files is 16,384 slots of 40 bytes, outside the heap.
    expect(last.state_bytes).toBe(16_384 * 40);
    // What the watcher keeps of 10,000 files is its table, not their paths (as strings in a Map,
    // about 1.2 MB).
    expect(known).toBeLessThan(0.5 * MiB);
    // Keeping each poll's listing (10,000 entries with their paths) would add several MiB a poll.
    expect(growth).toBeLessThan(2 * MiB);
  }, 300_000);
});

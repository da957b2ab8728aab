import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { DecideContext } from '../src/copy/diff.js';
import { keyOf, type ListedEntry } from '../src/copy/ordered-listing.js';
import { planOf } from '../src/copy/sync-engine.js';
import type { Entry } from '../src/connectors/types.js';
import type { SourceItem } from '../src/copy/types.js';
import { options } from './helpers/tree.js';

/**
 * The comparison is streamed (docs/agent.md "Sync, move and plans": memory): 1,000,000 entries a
 * side, generated in path order (not real files: the listing's own memory is the walker's, one
 * directory per depth), go through the same merge, comparison and plan bookkeeping as a plan of a
 * real transfer. Live memory (heap + array buffers after a GC; RSS keeps what the allocator
 * freed) does not grow with the entries. Figures are printed, no speed is asserted.
 */
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const MiB = 1024 * 1024;
const DIRS = 1000;
const PER_DIR = 1000;
const T0 = Date.UTC(2026, 0, 1);

/** Directory `d`, then its files, as a walker yields them; `side` changes 1% and drops 1% on each side. */
function* tree(side: 'source' | 'destination'): Generator<Entry> {
  for (let d = 0; d < DIRS; d++) {
    const dir = `dir-${String(d).padStart(4, '0')}`;
    yield { path: dir, kind: 'directory', size: 0 };
    for (let f = 0; f < PER_DIR; f++) {
      const n = d * PER_DIR + f;
      if (side === 'source' && n % 100 === 1) continue;
      if (side === 'destination' && n % 100 === 2) continue;
      const size = side === 'source' && n % 100 === 3 ? 2000 : 1000;
      yield { path: `${dir}/file-${String(f).padStart(4, '0')}.dat`, kind: 'file', size, modifiedAt: new Date(T0 + n * 1000) };
    }
  }
}

test('a 1,000,000-entry sync comparison: live memory does not grow with the entries', async () => {
  const live = () => {
    gc();
    const m = process.memoryUsage();
    return m.heapUsed + m.arrayBuffers;
  };
  let pairs = 0;
  const marks: Record<string, number> = {};
  let peakRss = 0;
  async function* source(): AsyncGenerator<SourceItem> {
    for (const entry of tree('source')) yield { path: entry.path, entry, open: () => Promise.reject(new Error('a plan reads nothing')) };
  }
  async function* destination(): AsyncGenerator<ListedEntry> {
    for (const entry of tree('destination')) {
      pairs++;
      if (pairs === 100_000) marks.early = live();
      if (pairs === 900_000) marks.late = live();
      if (pairs % 100_000 === 0) peakRss = Math.max(peakRss, process.memoryUsage().rss);
      yield { path: entry.path, key: keyOf(entry.path, entry), entry };
    }
  }
  const before = live();
  const ctx: DecideContext = {
    options: options({ mode: 'sync', concurrency: 16 }), signal: new AbortController().signal, destinationModTime: 'set', modifyWindowMs: 1000,
    statSource: () => Promise.resolve(null), statDestination: () => Promise.resolve(null),
    hashSource: () => Promise.reject(new Error('no hash')), hashDestination: () => Promise.reject(new Error('no hash')),
  };
  let items = 0;
  const { summary } = await planOf({ sourceItems: source(), destinationEntries: destination(), singleFile: false }, ctx, { item: () => { items++; } });
  const files = DIRS * PER_DIR;
  expect(summary).toMatchObject({ copy: files / 100, delete: files / 100, update: files / 100, skip: files - 3 * (files / 100) });
  // One item per path of either side: 990,000 on each, 10,000 only on one or the other.
  expect(items).toBe(files);
  const growth = marks.late! - marks.early!;
  process.stdout.write(`sync-memory: ${files} files a side: live memory ${(before / MiB).toFixed(1)} MiB before, ${(marks.early! / MiB).toFixed(1)} MiB at 100,000 entries, `
    + `${(marks.late! / MiB).toFixed(1)} MiB at 900,000 (growth ${(growth / MiB).toFixed(2)} MiB); peak RSS ${(peakRss / MiB).toFixed(0)} MiB\n`);
  // 800,000 more entries: a leak of 20 bytes per entry would show as 16 MiB.
  expect(growth).toBeLessThan(16 * MiB);
  // No absolute bound: a jest worker carries the heap of the files it ran before (568 MiB seen in CI); the growth is the measure.
}, 600_000);

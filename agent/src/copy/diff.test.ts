import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import fc from 'fast-check';
import { compileFilters, type FileFilter } from '@xfer/shared';
import { AgentAccess } from '../connectors/access.js';
import { FsConnector } from '../connectors/fs/fs.connector.js';
import type { Entry } from '../connectors/types.js';
import { decide, mergeListings, sameAsPlanned, planSide, type DecideContext, modifyWindowMs } from './diff.js';
import { DeletionList } from './deletion-list.js';
import { compareKeys, keyOf, orderedListing, type ListedEntry } from './ordered-listing.js';
import { deleteRefusal } from './sync-engine.js';
import type { SourceItem } from './types.js';

const PASS: FileFilter = { empty: true, prunes: false, includeFile: () => true, includeDirectory: () => true };
const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** Names that sort differently by UTF-16 units, bytes and with or without a directory's `/`. */
const NAME = fc.constantFrom('a', 'a-b', 'a0', 'b', 'ab', 'A', 'é', '日本', '\u{1F680}', '\uFF5E', 'z z', 'a.b');
const PATH = fc.array(NAME, { minLength: 1, maxLength: 4 }).map((parts) => parts.join('/'));

function fsRoot(): { root: string; connector: FsConnector; done: () => void } {
  const root = mkdtempSync(join(tmpdir(), 'xfer-ordered-'));
  const connector = new FsConnector({ root, fsync: false, access: new AgentAccess({ allowRoots: [root], allowHosts: [], denyHosts: [] }) });
  return { root, connector, done: () => rmSync(root, { recursive: true, force: true }) };
}

describe('compareKeys', () => {
  test('is UTF-8 byte order (code point order), not UTF-16 unit order', () => {
    fc.assert(fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), (a, b) => {
      expect(Math.sign(compareKeys(a, b))).toBe(Math.sign(byteOrder(a, b)));
    }));
    expect(compareKeys('\u{1F680}', '\uFF5E')).toBeGreaterThan(0);
    expect('\u{1F680}' < '\uFF5E').toBe(true);
  });
});

describe('orderedListing on a file store', () => {
  test('yields every entry of a generated tree once, in full-path byte order, directories keyed name/', async () => {
    await fc.assert(fc.asyncProperty(fc.uniqueArray(PATH, { minLength: 1, maxLength: 25 }), async (paths) => {
      const { root, connector, done } = fsRoot();
      try {
        const files = new Set<string>();
        const dirs = new Set<string>();
        for (const p of paths) {
          // A path that is a directory of another is made a directory; the rest are files.
          if (paths.some((q) => q.startsWith(`${p}/`)) || [...files].some((f) => p.startsWith(`${f}/`))) continue;
          mkdirSync(join(root, dirname(p)), { recursive: true });
          writeFileSync(join(root, p), p);
          files.add(p);
          for (let d = dirname(p); d !== '.'; d = dirname(d)) dirs.add(d);
        }
        const listed: ListedEntry[] = [];
        for await (const l of orderedListing({ connector, root: '/', filter: PASS, signal: new AbortController().signal, missing: 'fail' })) listed.push(l);
        const keys = listed.map((l) => l.key);
        const expected = [...[...files], ...[...dirs].map((d) => `${d}/`)].sort(byteOrder);
        expect(keys).toEqual(expected);
      } finally {
        done();
      }
    }), { numRuns: 25 });
  });

  test('a directory the filter excludes is never listed, nor anything below it', async () => {
    const { root, connector, done } = fsRoot();
    try {
      for (const p of ['keep/a.txt', 'skip/b.txt', 'skip/deep/c.txt', 'z.txt']) {
        mkdirSync(join(root, dirname(p)), { recursive: true });
        writeFileSync(join(root, p), p);
      }
      const listedDirs: string[] = [];
      const filter = compileFilters({ rules: ['- /skip/**', '- /z.txt'] }, new Date());
      const paths: string[] = [];
      for await (const l of orderedListing({ connector, root: '/', filter, signal: new AbortController().signal, missing: 'fail', onListed: (d) => listedDirs.push(d) })) paths.push(l.key);
      expect(paths).toEqual(['keep/', 'keep/a.txt']);
      expect(listedDirs.sort()).toEqual(['', 'keep']);
    } finally {
      done();
    }
  });
});

const T0 = Date.UTC(2026, 0, 1);
function file(path: string, size: number, mtime: number): Entry {
  return { path, kind: 'file', size, modifiedAt: new Date(mtime) };
}
async function* sourceOf(entries: Entry[]): AsyncGenerator<SourceItem> {
  for (const e of entries) yield { path: e.path, entry: e, open: () => Promise.reject(new Error('not read')) };
}
async function* destinationOf(entries: Entry[]): AsyncGenerator<ListedEntry> {
  for (const e of entries) yield { path: e.path, key: keyOf(e.path, e), entry: e };
}
const sorted = (m: Map<string, Entry>) => [...m.values()].sort((a, b) => compareKeys(a.path, b.path));
const CTX: Omit<DecideContext, 'options'> = {
  destinationModTime: 'set', modifyWindowMs: 1000, signal: new AbortController().signal,
  statSource: () => Promise.reject(new Error('no stat')), statDestination: () => Promise.reject(new Error('no stat')),
  hashSource: () => Promise.reject(new Error('no hash')), hashDestination: () => Promise.reject(new Error('no hash')),
};

describe('mergeListings + decide', () => {
  test('equal the set comparison of generated trees, in path order', async () => {
    const tree = fc.dictionary(PATH, fc.record({ size: fc.nat(3), mtime: fc.constantFrom(T0, T0 + 500, T0 + 5000) }), { maxKeys: 30 });
    await fc.assert(fc.asyncProperty(tree, tree, async (a, b) => {
      const src = new Map(Object.entries(a).map(([p, v]) => [p, file(p, v.size, v.mtime)]));
      const dst = new Map(Object.entries(b).map(([p, v]) => [p, file(p, v.size, v.mtime)]));
      const got: [string, string][] = [];
      const order: string[] = [];
      for await (const pair of mergeListings(sourceOf(sorted(src)), destinationOf(sorted(dst)))) {
        order.push(pair.key);
        const d = await decide(pair, undefined, { ...CTX, options: { overwrite: 'if_changed', verify: 'size', concurrency: 1, mode: 'sync' } });
        got.push([pair.path, d.action]);
      }
      expect(order).toEqual([...order].sort(byteOrder));
      const expected = new Map<string, string>();
      for (const [p, s] of src) {
        const d = dst.get(p);
        expected.set(p, !d ? 'copy' : d.size !== s.size || Math.abs(d.modifiedAt!.getTime() - s.modifiedAt!.getTime()) > 1000 ? 'update' : 'skip');
      }
      for (const p of dst.keys()) if (!src.has(p)) expected.set(p, 'delete');
      expect(new Map(got)).toEqual(expected);
      expect(got).toHaveLength(expected.size);
    }), { numRuns: 200 });
  });

  test('a source listing out of order fails clearly', async () => {
    const merged = mergeListings(sourceOf([file('b', 1, T0), file('a', 1, T0)]), destinationOf([]));
    await expect((async () => { for await (const p of merged) void p; })()).rejects.toThrow(/the source listed "a" after "b": not in path order/);
  });

  test('overwrite and compare: always updates, never skips, size ignores times, a destination that cannot keep times is "not older"', async () => {
    const both = { path: 'f', key: 'f', entry: file('f', 3, T0), source: file('f', 3, T0 + 10_000), destination: file('f', 3, T0), open: () => Promise.reject(new Error('x')) };
    const base = { overwrite: 'if_changed', verify: 'size', concurrency: 1 } as const;
    expect((await decide(both, undefined, { ...CTX, options: { ...base, overwrite: 'always' } })).action).toBe('update');
    expect((await decide(both, undefined, { ...CTX, options: { ...base, overwrite: 'never' } })).action).toBe('skip');
    expect(await decide(both, undefined, { ...CTX, options: { ...base, compare: 'size' } })).toMatchObject({ action: 'skip', same: true });
    expect(await decide(both, undefined, { ...CTX, options: base })).toMatchObject({ action: 'update', reason: 'modification time differs' });
    expect(await decide(both, undefined, { ...CTX, destinationModTime: 'none', options: base })).toMatchObject({ action: 'update', reason: 'source is newer' });
    const older = { ...both, source: file('f', 3, T0 - 10_000) };
    expect(await decide(older, undefined, { ...CTX, destinationModTime: 'none', options: base })).toMatchObject({ action: 'skip', reason: 'same size, destination not older' });
    const sums = { ...both, source: { ...both.source, checksum: { algorithm: 'md5' as const, value: 'AA' } }, destination: { ...both.destination, checksum: { algorithm: 'md5' as const, value: 'aa' } } };
    expect(await decide(sums, undefined, { ...CTX, options: { ...base, compare: 'checksum' } })).toMatchObject({ action: 'skip', reason: 'same md5' });
    const needsStat = { ...both, destination: { ...both.destination, modifiedAtNeedsStat: true } };
    const ctx = { ...CTX, statDestination: () => Promise.resolve(file('f', 3, T0 + 10_400)), options: base };
    expect(await decide(needsStat, undefined, ctx)).toMatchObject({ action: 'skip', reason: 'same size and mtime' });
  });

  test('modification times are the same within the coarser precision of the two ends (rclone\'s --modify-window)', async () => {
    expect(modifyWindowMs(1, 1)).toBe(1);
    expect(modifyWindowMs(1, 1000)).toBe(1000);
    expect(modifyWindowMs(undefined, 1)).toBe(1000);
    const base = { overwrite: 'if_changed', verify: 'size', concurrency: 1 } as const;
    const apart = (ms: number) => ({ path: 'f', key: 'f', entry: file('f', 3, T0 + ms), source: file('f', 3, T0 + ms), destination: file('f', 3, T0), open: () => Promise.reject(new Error('x')) });
    const decideWith = (ms: number, window: number) => decide(apart(ms), undefined, { ...CTX, modifyWindowMs: window, options: base });
    expect(await decideWith(0, 1)).toMatchObject({ action: 'skip', reason: 'same size and mtime' });
    expect(await decideWith(1, 1)).toMatchObject({ action: 'update', reason: 'modification time differs' });
    expect(await decideWith(-1, 1)).toMatchObject({ action: 'update', reason: 'modification time differs' });
    expect(await decideWith(999, 1000)).toMatchObject({ action: 'skip', reason: 'same size and mtime' });
    expect(await decideWith(-999, 1000)).toMatchObject({ action: 'skip', reason: 'same size and mtime' });
    expect(await decideWith(1000, 1000)).toMatchObject({ action: 'update', reason: 'modification time differs' });
  });
});

describe('plan sides, max_delete and the deletion list', () => {
  test('sameAsPlanned compares size, time and a checksum of the same algorithm', () => {
    const seen = { ...file('f', 3, T0), checksum: { algorithm: 'etag' as const, value: 'ab' } };
    const side = planSide(seen);
    expect(sameAsPlanned(side, seen)).toBe(true);
    expect(sameAsPlanned(side, { ...seen, size: 4 })).toBe(false);
    expect(sameAsPlanned(side, { ...seen, modifiedAt: new Date(T0 + 1) })).toBe(false);
    expect(sameAsPlanned(side, { ...seen, checksum: { algorithm: 'etag', value: 'cd' } })).toBe(false);
    expect(sameAsPlanned(side, { ...seen, checksum: { algorithm: 'sha256', value: 'ef' } })).toBe(true);
    expect(sameAsPlanned(undefined, null)).toBe(true);
    expect(sameAsPlanned(undefined, seen)).toBe(false);
    expect(sameAsPlanned(side, null)).toBe(false);
  });

  test('max_delete: a count or a percentage of the destination files in scope', () => {
    expect(deleteRefusal(undefined, 100, 100)).toBeNull();
    expect(deleteRefusal(3, 3, 10)).toBeNull();
    expect(deleteRefusal(3, 4, 10)).toMatch(/^max_delete 3 exceeded: 4 destination files/);
    expect(deleteRefusal('50%', 5, 10)).toBeNull();
    expect(deleteRefusal('50%', 6, 10)).toMatch(/max_delete 50% \(5 of 10 files\) exceeded/);
    expect(deleteRefusal(0, 0, 10)).toBeNull();
  });

  test('the deletion list keeps order past its memory part (spilled to a private file) and removes the file', async () => {
    const list = new DeletionList();
    for (let i = 0; i < 25_000; i++) list.add({ path: `p${i}`, size: i });
    let n = 0;
    for await (const d of list) {
      expect(d).toEqual({ path: `p${n}`, size: n });
      n++;
    }
    expect(n).toBe(25_000);
    expect(list.count).toBe(25_000);
    await list.dispose();
  });
});


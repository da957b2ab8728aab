import { createHash } from 'node:crypto';
import { chmodSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { FileResult, JobOptions, PlanItem } from '@xfer/shared';
import { copyTree } from '../src/copy/copy-engine.js';
import { computePlan } from '../src/copy/sync-engine.js';
import type { Connector } from '../src/connectors/types.js';
import { SOFT_CUTOFF_ERROR } from '../src/copy/copy-engine.js';
import type { CopyOutcome, CopyRequest } from '../src/copy/types.js';
import { FAST_RETRIES, options } from './helpers/tree.js';
import { S3WatchStore, SftpWatchStore, type WatchStore } from './helpers/watch-stores.js';
import { WrappedConnector } from './helpers/wrapped-connector.js';

/** Path → SHA-256 of every file below the connector's base, read through it. */
async function treeOf(connector: Connector): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for await (const entry of connector.list('', { recursive: true })) {
    if (entry.kind !== 'file') continue;
    const hash = createHash('sha256');
    for await (const chunk of await connector.read(entry.path)) hash.update(chunk as Buffer);
    out[entry.path] = hash.digest('hex');
  }
  return out;
}

async function run(source: Connector, destination: Connector, opts: Partial<JobOptions>, extra: Partial<Pick<CopyRequest, 'plan' | 'limits' | 'resume' | 'askVerified' | 'run'>> = {}): Promise<CopyOutcome & { files: FileResult[] }> {
  const files: FileResult[] = [];
  const outcome = await copyTree({
    source, sourcePath: '/', destination, destinationPath: '/', options: options(opts), resume: false,
    signal: new AbortController().signal, tuning: FAST_RETRIES, observer: { fileDone: (r) => files.push(r) }, ...extra,
  });
  return { ...outcome, files };
}

const names = (files: FileResult[], status: FileResult['status']) => files.filter((f) => f.status === status).map((f) => f.path).sort();

/** 40 files over a few directories, `f<i>` with content of its own. */
async function fill(store: WatchStore): Promise<string[]> {
  const paths: string[] = [];
  for (let i = 0; i < 40; i++) {
    const path = `${['a', 'a/b', 'c', 'z-dir', 'a-b'][i % 5]}/f${String(i).padStart(2, '0')}.txt`;
    paths.push(path);
    await store.put(path, `file ${i}\n`.repeat(i + 1));
  }
  return paths.sort();
}

/**
 * An sftp folder whose directories the server's user may write in (the store makes them as this
 * process's user): a move deletes source files, a sync writes into directories made by `put`.
 */
class WritableSftp extends SftpWatchStore {
  constructor() {
    super();
    chmodSync(this.dir, 0o777);
  }

  override async put(rel: string, data: string | Buffer): Promise<void> {
    await super.put(rel, data);
    for (let dir = dirname(rel); dir !== '.'; dir = dirname(dir)) chmodSync(join(this.dir, dir), 0o777);
  }
}

type Pair = { name: string; make: () => Promise<[WatchStore, WatchStore]> };
const PAIRS: Pair[] = [
  { name: 'sftp → s3', make: async () => [new WritableSftp(), await S3WatchStore.create()] },
  { name: 's3 → sftp', make: async () => [await S3WatchStore.create(), new WritableSftp()] },
];

describe.each(PAIRS)('sync engine, $name', ({ make }) => {
  let src: WatchStore;
  let dst: WatchStore;
  let paths: string[];
  beforeEach(async () => {
    [src, dst] = await make();
    paths = await fill(src);
  });
  afterEach(async () => {
    await src.cleanup();
    await dst.cleanup();
  });

  test('sync, then change 10, delete 10, add 10: the second sync does exactly those 30 and the trees are equal', async () => {
    const first = await run(src.connector, dst.connector, { mode: 'sync' });
    expect(first.status).toBe('completed');
    expect(first.counters).toMatchObject({ files_total: 40, files_transferred: 40, files_deleted: 0 });
    expect(await treeOf(dst.connector)).toEqual(await treeOf(src.connector));
    // Extra destination content the first sync removed? none: same trees. Now change the source.
    const changed = paths.slice(0, 10);
    const deleted = paths.slice(10, 20);
    const added = Array.from({ length: 10 }, (_, i) => `new/dir${i % 3}/n${i}.bin`);
    for (const p of changed) await src.put(p, `changed ${p}, longer than before\n`);
    for (const p of deleted) await src.remove(p);
    for (const p of added) await src.put(p, `added ${p}\n`);
    const second = await run(src.connector, dst.connector, { mode: 'sync' });
    expect(second.status).toBe('completed');
    expect(names(second.files, 'copied')).toEqual([...changed, ...added].sort());
    expect(names(second.files, 'deleted')).toEqual(deleted);
    expect(second.files.filter((f) => f.status === 'copied' && changed.includes(f.path)).every((f) => f.reason === 'size differs')).toBe(true);
    expect(second.counters).toMatchObject({ files_transferred: 20, files_deleted: 10, files_failed: 0, files_skipped: 20 });
    // Both keep the source's time (sftp sets it, s3 stores it as `mtime` metadata): unchanged files
    // compare equal by it (else they would be updated), and are counted without a per-file result.
    expect(second.files.filter((f) => f.status === 'skipped')).toEqual([]);
    expect(await treeOf(dst.connector)).toEqual(await treeOf(src.connector));
  });

  test('a failed copy: nothing is deleted and the error says why', async () => {
    expect((await run(src.connector, dst.connector, { mode: 'sync' })).status).toBe('completed');
    await src.remove(paths[0]!);
    await src.put('a/new.txt', 'new');
    const failing = new WrappedConnector(dst.connector);
    failing.beforeWrite = (path) => {
      if (path.includes('new.txt')) throw new Error('disk full (test)');
    };
    const second = await run(src.connector, failing, { mode: 'sync' });
    expect(second.status).toBe('failed');
    expect(second.error).toMatch(/a\/new\.txt .*disk full.*nothing was deleted \(1 destination file not in the source kept\)/);
    expect(names(second.files, 'deleted')).toEqual([]);
    expect(Object.keys(await treeOf(dst.connector))).toContain(paths[0]);
  });

  test('max_delete exceeded: nothing is deleted, a clear error', async () => {
    expect((await run(src.connector, dst.connector, { mode: 'sync' })).status).toBe('completed');
    for (const p of paths.slice(0, 5)) await src.remove(p);
    const refused = await run(src.connector, dst.connector, { mode: 'sync', max_delete: 4 });
    expect(refused.status).toBe('failed');
    expect(refused.error).toBe('max_delete 4 exceeded: 5 destination files are not in the source; nothing was deleted');
    expect(Object.keys(await treeOf(dst.connector))).toHaveLength(40);
    const percent = await run(src.connector, dst.connector, { mode: 'sync', max_delete: '10%' });
    expect(percent.error).toMatch(/max_delete 10% \(4 of 40 files\) exceeded/);
    const allowed = await run(src.connector, dst.connector, { mode: 'sync', max_delete: '12.5%' });
    expect(allowed.status).toBe('completed');
    expect(names(allowed.files, 'deleted')).toEqual(paths.slice(0, 5));
  });

  test('move: each source file is deleted once its copy is verified, and one already identical too', async () => {
    await src.put(paths[1]!, 'the same on both sides');
    await dst.put(paths[1]!, 'the same on both sides');
    const moved = await run(src.connector, dst.connector, { mode: 'move', compare: 'checksum' });
    expect(moved.status).toBe('completed');
    expect(moved.counters).toMatchObject({ files_transferred: 39, files_skipped: 1, files_deleted: 40 });
    // The identical one is counted skipped (no per-file result: found equal) and its source deleted.
    expect(moved.files.filter((f) => f.path === paths[1])).toEqual([expect.objectContaining({ status: 'deleted', reason: 'moved: its copy is verified' })]);
    expect(await treeOf(src.connector)).toEqual({});
    expect(Object.keys(await treeOf(dst.connector)).sort()).toEqual(paths);
  });

  test('plan, then apply with a file changed in between: it is left and reported "changed since plan"', async () => {
    await dst.put('only-at-destination.txt', 'stale');
    await dst.put(paths[2]!, 'different');
    const items: PlanItem[] = [];
    const { summary, fingerprint } = await computePlan({
      source: src.connector, sourcePath: '/', destination: dst.connector, destinationPath: '/',
      options: options({ mode: 'sync' }), resume: false, signal: new AbortController().signal,
    }, { item: (i) => { items.push(i); } });
    expect(summary).toMatchObject({ copy: 39, update: 1, delete: 1, skip: 0 });
    expect(fingerprint).toMatch(/^[0-9a-f]{64}$/);
    expect(items.map((i) => i.path)).toEqual([...items.map((i) => i.path)].sort((a, b) => (Buffer.compare(Buffer.from(a), Buffer.from(b)))));
    // Nothing written by the plan.
    expect(Object.keys(await treeOf(dst.connector)).sort()).toEqual([paths[2], 'only-at-destination.txt'].sort());
    await src.put(paths[5]!, 'changed after the plan');
    const applied = await run(src.connector, dst.connector, { mode: 'sync' }, { plan: (async function* () { yield* items; })() });
    expect(applied.status).toBe('completed');
    expect(applied.files.find((f) => f.path === paths[5])).toMatchObject({ status: 'skipped', reason: 'changed since plan' });
    expect(names(applied.files, 'copied')).toHaveLength(39);
    expect(names(applied.files, 'deleted')).toEqual(['only-at-destination.txt']);
    const tree = await treeOf(dst.connector);
    expect(tree[paths[5]!]).toBeUndefined();
    expect(tree['only-at-destination.txt']).toBeUndefined();
  });
  test('a soft cutoff during a sync: no new file starts and nothing is deleted', async () => {
    expect((await run(src.connector, dst.connector, { mode: 'sync' })).status).toBe('completed');
    for (const p of paths.slice(0, 3)) await src.remove(p);
    for (const p of paths.slice(3, 13)) await src.put(p, `changed ${p}, longer than before\n`);
    let started = 0;
    const cut = await run(src.connector, dst.connector, { mode: 'sync', concurrency: 1 }, {
      limits: { pace: (body) => body, mayStart: () => started++ < 15 },
    });
    expect(cut.status).toBe('failed');
    expect(cut.error).toBe(SOFT_CUTOFF_ERROR);
    expect(names(cut.files, 'deleted')).toEqual([]);
    expect(Object.keys(await treeOf(dst.connector))).toEqual(expect.arrayContaining(paths.slice(0, 3)));
  });

  test('a retry of a plan\'s apply: what attempt 1 copied is "verified by attempt 1", the rest is done, then the deletions', async () => {
    await dst.put('stale.txt', 'stale');
    const items: PlanItem[] = [];
    await computePlan({
      source: src.connector, sourcePath: '/', destination: dst.connector, destinationPath: '/', options: options({ mode: 'sync' }), resume: false, signal: new AbortController().signal,
    }, { item: (i) => { items.push(i); } });
    const failing = new WrappedConnector(dst.connector);
    failing.beforeWrite = (path) => {
      if (path.includes(paths[7]!.split('/').pop()!)) throw new Error('disk full (test)');
    };
    const planOf = () => (async function* () { yield* items; })();
    const first = await run(src.connector, failing, { mode: 'sync' }, { plan: planOf(), run: { jobId: 'job-retry', attempt: 1 } });
    expect(first.status).toBe('failed');
    expect(names(first.files, 'deleted')).toEqual([]);
    const verified = first.files.filter((f) => f.status === 'copied');
    expect(verified).toHaveLength(39);
    const second = await run(src.connector, dst.connector, { mode: 'sync' }, {
      plan: planOf(), resume: true, run: { jobId: 'job-retry', attempt: 2 },
      askVerified: (asked) => Promise.resolve(verified.filter((f) => asked.includes(f.path)).map((f) => ({ path: f.path, size: f.size, sha256: f.sha256!, attempt: 1 }))),
    });
    expect(second.status).toBe('completed');
    expect(names(second.files, 'copied')).toEqual([paths[7]]);
    expect(second.files.filter((f) => f.reason === 'verified by attempt 1')).toHaveLength(39);
    expect(names(second.files, 'deleted')).toEqual(['stale.txt']);
    expect(await treeOf(dst.connector)).toEqual(await treeOf(src.connector));
  });
  test('a single-file source: synced under its name, compared by its own stat the second time, nothing else deleted', async () => {
    await dst.put('other.txt', 'not the run\'s business');
    const one = async () => {
      const files: FileResult[] = [];
      const outcome = await copyTree({
        source: src.connector, sourcePath: `/${paths[4]}`, destination: dst.connector, destinationPath: '/', options: options({ mode: 'sync' }), resume: false,
        signal: new AbortController().signal, tuning: FAST_RETRIES, observer: { fileDone: (r) => files.push(r) },
      });
      return { ...outcome, files };
    };
    const first = await one();
    expect(first.status).toBe('completed');
    const name = paths[4]!.split('/').pop()!;
    expect(first.files.map((f) => [f.path, f.status])).toEqual([[name, 'copied']]);
    const second = await one();
    expect(second.files).toEqual([]);
    expect(second.counters).toMatchObject({ files_total: 1, files_skipped: 1, files_transferred: 0 });
    expect(Object.keys(await treeOf(dst.connector)).sort()).toEqual([name, 'other.txt'].sort());
  });
  test('filters apply to both sides: excluded source files are not copied, excluded destination files never deleted, an excluded directory never listed', async () => {
    await src.put('skip/deep/x.txt', 'excluded source');
    await src.put('a/junk.tmp', 'excluded source');
    await dst.put('skip/kept.txt', 'excluded destination');
    await dst.put('c/old.tmp', 'excluded destination');
    await dst.put('c/stale.txt', 'not in the source');
    const listedAt = (c: Connector) => {
      const w = new WrappedConnector(c);
      const dirs: string[] = [];
      const list = w.list.bind(w);
      w.list = (path, o) => {
        dirs.push(path);
        return list(path, o);
      };
      return { w, dirs };
    };
    const source = listedAt(src.connector);
    const synced = await run(source.w, dst.connector, { mode: 'sync', filters: { rules: ['- /skip/**', '- *.tmp'] } });
    expect(synced.status).toBe('completed');
    expect(names(synced.files, 'copied')).toEqual(paths);
    expect(names(synced.files, 'deleted')).toEqual(['c/stale.txt']);
    const tree = Object.keys(await treeOf(dst.connector));
    expect(tree).toEqual(expect.arrayContaining(['skip/kept.txt', 'c/old.tmp']));
    expect(tree).not.toContain('a/junk.tmp');
    // A file store is walked one directory at a time and never enters skip/; an object store lists by key once.
    expect(source.dirs.filter((d) => d.startsWith('skip'))).toEqual([]);
  });
});

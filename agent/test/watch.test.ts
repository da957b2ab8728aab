import { setTimeout as sleep } from 'node:timers/promises';
import { ConnectorError } from '../src/connectors/types.js';
import { FolderWatch, WatchSpecError, type FileVersion, type FirstListing, type WatchSpec } from '../src/watch/index.js';
import { BlobWatchStore, S3WatchStore, SftpWatchStore, WebdavWatchStore, type WatchStore } from './helpers/watch-stores.js';
import { WrappedConnector } from './helpers/wrapped-connector.js';

/**
 * The folder watch poller against the real sftp (OpenSSH) and S3 (versitygw) test servers. Time
 * is a clock the test steps (`now`), except in the test of a file written while polled, which runs
 * on the real clock.
 */

function spec(over: Partial<WatchSpec> = {}): WatchSpec {
  return { path: '', pattern: '*', recursive: false, stable_seconds: 0, include_existing: false, ...over };
}

/** A watch, its connector, a stepped clock, and one poll that returns what it reported. */
function watcher(store: Pick<WatchStore, 'connector'>, over: Partial<WatchSpec> = {}, first: FirstListing = {}) {
  const watch = new FolderWatch(spec(over), first);
  const clock = { ms: 1_000_000 };
  return {
    watch,
    clock,
    async poll(advanceSeconds = 0): Promise<FileVersion[]> {
      clock.ms += advanceSeconds * 1000;
      const got: FileVersion[] = [];
      await watch.poll(store.connector, { report: (v) => void got.push(v), now: () => clock.ms });
      return got;
    },
  };
}

const paths = (versions: FileVersion[]) => versions.map((v) => v.path).sort();

describe.each([
  ['sftp', async (): Promise<WatchStore> => new SftpWatchStore()],
  ['s3', async (): Promise<WatchStore> => S3WatchStore.create()],
  ['blob', async (): Promise<WatchStore> => BlobWatchStore.create()],
])('folder watch on %s', (_type, makeStore) => {
  let store: WatchStore;
  beforeEach(async () => {
    store = await makeStore();
  });
  afterEach(async () => {
    await store.cleanup();
  });

  it('does not report the files there at the start, then reports each new one once', async () => {
    await store.put('old-1.csv', 'a');
    await store.put('old-2.csv', 'b');
    const w = watcher(store);
    expect(await w.poll()).toEqual([]);
    expect(w.watch.started).toBe(true);
    await store.put('new.csv', 'c');
    const [found, ...rest] = await w.poll(1);
    expect(rest).toEqual([]);
    expect(found).toMatchObject({ path: 'new.csv', name: 'new.csv', size: 1 });
    expect(found!.modified_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(await w.poll(1)).toEqual([]);
    expect(await w.poll(60)).toEqual([]);
  });

  it('reports the files there at the start with include_existing', async () => {
    await store.put('old-1.csv', 'a');
    await store.put('old-2.csv', 'b');
    const w = watcher(store, { include_existing: true });
    expect(paths(await w.poll())).toEqual(['old-1.csv', 'old-2.csv']);
    expect(await w.poll(1)).toEqual([]);
  });

  it('reports a changed file again as a new version, once', async () => {
    const w = watcher(store);
    await w.poll();
    await store.put('data.csv', 'version one');
    const [first] = await w.poll(1);
    expect(first).toMatchObject({ path: 'data.csv', size: 11 });
    await store.put('data.csv', 'version two, longer');
    const [second, ...rest] = await w.poll(1);
    expect(rest).toEqual([]);
    expect(second).toMatchObject({ path: 'data.csv', size: 19 });
    expect(second!.version).not.toBe(first!.version);
    expect(await w.poll(1)).toEqual([]);
  });

  it('waits until a version was seen unchanged for stable_seconds', async () => {
    const w = watcher(store, { stable_seconds: 5 });
    await w.poll();
    // Replaced every 2 s (an object store's stand-in for a growing file): never 5 s the same.
    let content = 'x';
    await store.put('growing.bin', content);
    for (let i = 0; i < 4; i++) {
      expect(await w.poll(2)).toEqual([]);
      content += 'more data ';
      await store.put('growing.bin', content);
    }
    expect(await w.poll(2)).toEqual([]); // first seen in its final form
    expect(await w.poll(4.9)).toEqual([]);
    const [done, ...rest] = await w.poll(0.1);
    expect(rest).toEqual([]);
    expect(done).toMatchObject({ path: 'growing.bin', size: content.length });
    expect(await w.poll(10)).toEqual([]);
  });

  it('matches the pattern on file names, in sub-folders only when recursive', async () => {
    for (const name of ['a.csv', 'b.CSV', 'c.tmp', '.hidden.csv', 'sub/d.csv', 'sub/deeper/e.csv', 'sub/f.txt']) await store.put(name, name);
    expect(paths(await watcher(store, { pattern: '*.csv', include_existing: true }).poll())).toEqual(['a.csv']);
    expect(paths(await watcher(store, { pattern: '*.csv', include_existing: true, recursive: true }).poll())).toEqual(['a.csv', 'sub/d.csv', 'sub/deeper/e.csv']);
    expect(paths(await watcher(store, { pattern: '*.{csv,txt}', include_existing: true, recursive: true, path: 'sub' }).poll())).toEqual(['sub/d.csv', 'sub/deeper/e.csv', 'sub/f.txt']);
    // A folder given with a leading slash (as users type it) is the same folder; paths stay relative.
    expect(paths(await watcher(store, { pattern: '*.csv', include_existing: true, path: '/sub' }).poll())).toEqual(['sub/d.csv']);
    expect(paths(await watcher(store, { pattern: '.*', include_existing: true }).poll())).toEqual(['.hidden.csv']);
    expect(paths(await watcher(store, { pattern: '!*.tmp', include_existing: true }).poll())).toEqual(['.hidden.csv', 'a.csv', 'b.CSV']);
  });

  it('forgets a file that is gone, so the same file put back is new', async () => {
    await store.put('again.csv', 'same bytes');
    const w = watcher(store, { include_existing: true });
    expect(paths(await w.poll())).toEqual(['again.csv']);
    await store.remove('again.csv');
    expect(await w.poll(1)).toEqual([]);
    await store.put('again.csv', 'same bytes');
    expect(paths(await w.poll(1))).toEqual(['again.csv']);
  });

  it('offers a version again when reporting it failed', async () => {
    const w = watcher(store);
    await w.poll();
    await store.put('one.csv', '1');
    await store.put('two.csv', '2');
    let calls = 0;
    const refused = w.watch.poll(store.connector, {
      report: () => {
        calls++;
        throw new Error('control plane away');
      },
      now: () => w.clock.ms,
    });
    await expect(refused).rejects.toThrow('control plane away');
    expect(calls).toBe(1);
    expect(paths(await w.poll(1))).toEqual(['one.csv', 'two.csv']);
    expect(await w.poll(1)).toEqual([]);
  });

  it('with report_since, the first listing reports what was modified since, once stable, whatever include_existing says', async () => {
    await store.put('old.csv', 'before');
    // The store's own clock: report_since is a time of the store's modification times.
    const oldAt = (await store.connector.stat('old.csv'))!.modifiedAt!.getTime();
    const since = new Date(oldAt + 1000);
    while (Date.now() < since.getTime() + 1100) await sleep(100);
    await store.put('new.csv', 'after');
    const w = watcher(store, { include_existing: true, stable_seconds: 5 }, { report_since: since });
    expect(await w.poll()).toEqual([]);
    expect(w.watch.started).toBe(true);
    expect(paths(await w.poll(5))).toEqual(['new.csv']);
    expect(await w.poll(5)).toEqual([]);
    // The baseline file changed after the first listing: a new version like any other.
    await store.put('old.csv', 'changed later');
    expect(paths(await w.poll(1))).toEqual([]);
    expect(paths(await w.poll(5))).toEqual(['old.csv']);
  });

  it('fails the poll with NOT_FOUND when the folder does not exist', async () => {
    const w = new FolderWatch(spec({ path: 'missing/folder' }));
    const poll = w.poll(store.connector, { report: () => undefined });
    if (store instanceof S3WatchStore || store instanceof BlobWatchStore) {
      // An object store has no folders: a prefix with nothing under it is an empty folder.
      await expect(poll).resolves.toMatchObject({ listed: 0 });
    } else {
      await expect(poll).rejects.toMatchObject({ name: 'ConnectorError', code: 'NOT_FOUND' });
      await expect(w.poll(store.connector, { report: () => undefined })).rejects.toBeInstanceOf(ConnectorError);
    }
  });
});

describe.each([
  ['sftp', async (): Promise<WatchStore> => new SftpWatchStore()],
  ['s3', async (): Promise<WatchStore> => S3WatchStore.create()],
])('folder watch on %s: filters', (_type, makeStore) => {
  let store: WatchStore;
  beforeEach(async () => {
    store = await makeStore();
  });
  afterEach(async () => {
    await store.cleanup();
  });

  it('reports only the files the filters keep, and never lists a directory they prune', async () => {
    for (const name of ['keep/a.csv', 'keep/top.csv', 'skip/c.csv', 'skip/deep/d.csv', 'top.csv', 'x.tmp', 'ok.csv']) await store.put(`in/${name}`, 'small');
    await store.put('in/big.csv', 'x'.repeat(50));
    const wrapped = new WrappedConnector(store.connector);
    const listed: string[] = [];
    wrapped.mapEntry = (entry) => {
      listed.push(entry.path);
      return entry;
    };
    // Paths relative to the watched folder: `/top.csv` is in/top.csv, not in/keep/top.csv.
    const watch = new FolderWatch(spec({
      path: 'in', recursive: true, include_existing: true,
      filters: { rules: ['- skip/', '- *.tmp', '- /top.csv'], max_size: 10 },
    }));
    const got: FileVersion[] = [];
    const summary = await watch.poll(wrapped, { report: (v) => void got.push(v) });
    expect(paths(got)).toEqual(['in/keep/a.csv', 'in/keep/top.csv', 'in/ok.csv']);
    expect(summary).toMatchObject({ matched: 3, reported: 3 });
    expect(listed).toContain('in/keep/a.csv');
    expect(listed.filter((p) => p.startsWith('in/skip/'))).toEqual([]);
  });
});

describe('folder watch on sftp: size and modification time', () => {
  let store: SftpWatchStore;
  beforeEach(() => {
    store = new SftpWatchStore();
  });
  afterEach(async () => {
    await store.cleanup();
  });

  it('a file rewritten with the same size but a new modification time is a new version', async () => {
    await store.put('same-size.csv', 'aaaa');
    store.setMtime('same-size.csv', 1_700_000_000);
    const w = watcher(store);
    await w.poll();
    await store.put('same-size.csv', 'bbbb');
    store.setMtime('same-size.csv', 1_700_000_100);
    const [v] = await w.poll(1);
    expect(v).toMatchObject({ path: 'same-size.csv', size: 4, version: `size:4:mtime:${1_700_000_100_000}`, modified_at: new Date(1_700_000_100_000).toISOString() });
  });

  it('a file growing while polled on the real clock is reported once, complete, after it stopped', async () => {
    const watch = new FolderWatch(spec({ stable_seconds: 2 }));
    const reports: { version: FileVersion; at: number }[] = [];
    const poll = () => watch.poll(store.connector, { report: (version) => void reports.push({ version, at: Date.now() }) });
    await poll();
    // The writer appends every 150 ms for 3 s; the poller lists every 400 ms.
    await store.put('upload.dat', '');
    let writing = true;
    let stoppedAt = 0;
    const writer = (async () => {
      for (let i = 0; i < 20; i++) {
        store.append('upload.dat', Buffer.alloc(1000, i));
        await sleep(150);
      }
      writing = false;
      stoppedAt = Date.now();
    })();
    // Until the report after the writer stopped (its 2 s of stability take longer on a loaded machine).
    while (writing || Date.now() - stoppedAt < 12_000) {
      await poll();
      if (reports.length > 0 && !writing) break;
      await sleep(400);
    }
    await writer;
    expect(reports).toHaveLength(1);
    expect(reports[0]!.version).toMatchObject({ path: 'upload.dat', size: 20_000 });
    expect(reports[0]!.at - stoppedAt).toBeGreaterThanOrEqual(1500);
    for (let i = 0; i < 3; i++) await poll();
    expect(reports).toHaveLength(1);
  }, 20_000);
});

describe('folder watch on sftp: report_since and report_undated', () => {
  let store: SftpWatchStore;
  const SINCE = 1_700_000_000;
  beforeEach(() => {
    store = new SftpWatchStore();
  });
  afterEach(async () => {
    await store.cleanup();
  });

  async function files(times: Record<string, number>): Promise<void> {
    for (const [name, seconds] of Object.entries(times)) {
      await store.put(name, name);
      store.setMtime(name, seconds);
    }
  }

  it('a file modified exactly at report_since is new, one a second before is the baseline, with include_existing false too', async () => {
    await files({ 'before.csv': SINCE - 1, 'at.csv': SINCE, 'after.csv': SINCE + 3600 });
    const w = watcher(store, { include_existing: false }, { report_since: new Date(SINCE * 1000) });
    expect(paths(await w.poll())).toEqual(['after.csv', 'at.csv']);
    expect(await w.poll(1)).toEqual([]);
  });

  it('report_since is read on the first listing only: a file arriving later with an old modification time (a move keeps it) is new', async () => {
    await files({ 'old.csv': SINCE - 10 });
    const w = watcher(store, {}, { report_since: new Date(SINCE * 1000) });
    expect(await w.poll()).toEqual([]);
    await files({ 'moved-in.csv': SINCE - 100_000 });
    expect(paths(await w.poll(1))).toEqual(['moved-in.csv']);
  });

  it('a first listing that failed part-way is not the baseline: the next one reads report_since again', async () => {
    await files({ 'a-old.csv': SINCE - 10, 'b-new.csv': SINCE + 10, 'c-new.csv': SINCE + 20 });
    const wrapped = new WrappedConnector(store.connector);
    let calls = 0;
    wrapped.mapEntry = (entry) => {
      if (++calls === 2) throw new Error('connection lost');
      return entry;
    };
    const watch = new FolderWatch(spec({ stable_seconds: 0 }), { report_since: new Date(SINCE * 1000) });
    const got: FileVersion[] = [];
    await expect(watch.poll(wrapped, { report: (v) => void got.push(v) })).rejects.toThrow('connection lost');
    expect(watch.started).toBe(false);
    await watch.poll(wrapped, { report: (v) => void got.push(v) });
    expect(paths(got)).toEqual(['b-new.csv', 'c-new.csv']);
  });

  it.each([
    [true, ['undated.csv']],
    [false, []],
  ])('a file without modification time is new on the first listing iff report_undated (%s)', async (undated, expected) => {
    await files({ 'undated.csv': SINCE - 10 });
    // A store that gives no time (FTP with LIST only): the real listing, its times dropped.
    const wrapped = new WrappedConnector(store.connector);
    wrapped.mapEntry = ({ modifiedAt: _dropped, ...entry }) => entry;
    const watch = new FolderWatch(spec(), { report_since: new Date(SINCE * 1000), report_undated: undated });
    const got: FileVersion[] = [];
    await watch.poll(wrapped, { report: (v) => void got.push(v) });
    expect(paths(got)).toEqual(expected);
    expect(got.every((v) => v.modified_at === undefined && v.version === `size:${'undated.csv'.length}`)).toBe(true);
  });
});

describe('folder watch on s3: entity tags', () => {
  let store: S3WatchStore;
  beforeEach(async () => {
    store = await S3WatchStore.create();
  });
  afterEach(async () => {
    await store.cleanup();
  });

  it('an object replaced by other bytes of the same size is a new version; the same bytes again are not', async () => {
    await store.put('same-size.csv', 'aaaa');
    const w = watcher(store, { include_existing: true });
    const [first] = await w.poll();
    // The plain MD5 ETag of a single PUT, quotes included as the store sends it.
    expect(first).toMatchObject({ path: 'same-size.csv', version: 'etag:"74b87337454200d4d33f80c4663dc5e5"' });
    await store.put('same-size.csv', 'bbbb');
    const [second, ...rest] = await w.poll(1);
    expect(rest).toEqual([]);
    expect(second).toMatchObject({ path: 'same-size.csv', size: 4, version: 'etag:"65ba841e01d6db7733e90a5b7f9e6f80"' });
    // Uploaded again with the same content: a new LastModified, the same ETag, the same version.
    await sleep(1100);
    await store.put('same-size.csv', 'bbbb');
    expect(await w.poll(1)).toEqual([]);
  });
});

describe('folder watch on blob: entity tags', () => {
  it('the same bytes uploaded again are a new version (Azure changes the ETag on every write)', async () => {
    const store = await BlobWatchStore.create();
    try {
      await store.put('report.csv', 'same');
      const w = watcher(store, { include_existing: true });
      const [first] = await w.poll();
      expect(first!.version).toMatch(/^etag:"?0x[0-9A-F]+"?$/);
      await store.put('report.csv', 'same');
      const [second, ...rest] = await w.poll(1);
      expect(rest).toEqual([]);
      expect(second).toMatchObject({ path: 'report.csv', size: 4 });
      expect(second!.version).not.toBe(first!.version);
      expect(await w.poll(1)).toEqual([]);
    } finally {
      await store.cleanup();
    }
  });
});

describe.each(['rclone', 'apache'] as const)('folder watch on webdav (%s): entity tags', (server) => {
  it('takes the getetag as the version, and a replaced file as a new one', async () => {
    const store = await WebdavWatchStore.create(server);
    try {
      await store.put('a.csv', 'first');
      const w = watcher(store, { include_existing: true });
      const [first] = await w.poll();
      expect(first!.version).toMatch(/^etag:/);
      await store.put('a.csv', 'second, longer');
      const [second, ...rest] = await w.poll(1);
      expect(rest).toEqual([]);
      expect(second).toMatchObject({ path: 'a.csv', size: 14 });
      expect(second!.version).not.toBe(first!.version);
      expect(await w.poll(1)).toEqual([]);
    } finally {
      await store.cleanup();
    }
  });
});

describe('watch specs', () => {
  it.each<[string, Partial<WatchSpec>, RegExp]>([
    ['an empty pattern', { pattern: '' }, /^pattern must be a non-empty string/],
    ['a pattern with a slash', { pattern: 'in/sub/*.csv' }, /^pattern matches file names and cannot contain "\/"/],
    ['a pattern over 1024 characters', { pattern: 'x'.repeat(1025) }, /^pattern must be at most 1024 characters/],
    ['negative stable_seconds', { stable_seconds: -1 }, /^stable_seconds must be a whole number from 0 to 86400/],
    ['fractional stable_seconds', { stable_seconds: 1.5 }, /^stable_seconds must be a whole number/],
    ['stable_seconds over a day', { stable_seconds: 86_401 }, /^stable_seconds must be a whole number/],
    ['a recursive that is no boolean', { recursive: 'yes' as unknown as boolean }, /^recursive must be true or false/],
    ['an include_existing that is no boolean', { include_existing: 1 as unknown as boolean }, /^include_existing must be true or false/],
    ['a path that is no string', { path: 3 as unknown as string }, /^path must be a string/],
    ['a filter rule that does not parse', { filters: { rules: ['+ *.csv', '- [a'] } }, /^filters\.rules\[1\]: "- \[a" is not a valid pattern: unclosed \[/],
  ])('refuses %s, naming the field', (_label, over, message) => {
    let error: unknown;
    try {
      new FolderWatch(spec(over));
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(WatchSpecError);
    expect((error as Error).message).toMatch(message);
    expect((error as WatchSpecError).field).toBe(Object.keys(over)[0]);
  });

  it.each<[string, FirstListing, RegExp]>([
    ['an invalid report_since', { report_since: new Date('not a date') }, /^report_since must be a valid date and time/],
    ['a report_undated that is no boolean', { report_since: new Date(), report_undated: 'yes' as unknown as boolean }, /^report_undated must be true or false/],
  ])('refuses %s, naming the field', (_label, first, message) => {
    expect(() => new FolderWatch(spec(), first)).toThrow(message);
  });

  it('refuses a second poll of the same watch while one runs', async () => {
    const store = new SftpWatchStore();
    try {
      const w = new FolderWatch(spec());
      const first = w.poll(store.connector, { report: () => undefined });
      await expect(w.poll(store.connector, { report: () => undefined })).rejects.toThrow(/already running/);
      await first;
    } finally {
      await store.cleanup();
    }
  });
});

import { createHash } from 'node:crypto';
import { closeSync, existsSync, ftruncateSync, openSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import type { FileResult } from '@xfer/shared';
import { ConnectorError } from '../src/connectors/types.js';
import { copyTree } from '../src/copy/copy-engine.js';
import type { CopyOutcome, DirectCopyRequest } from '../src/copy/types.js';
import { FAST_RETRIES, fsConnector, options, partFiles, rmTemp, sha256, snapshot, tempDir, writeTree } from './helpers/tree.js';
import { corruptByteAt, WrappedConnector } from './helpers/wrapped-connector.js';

let src: string;
let dst: string;

beforeEach(() => {
  src = tempDir('xfer-src-');
  dst = tempDir('xfer-dst-');
});
afterEach(() => {
  rmTemp(src);
  rmTemp(dst);
});

/** Runs the engine from `src` to `dst` and collects every FileResult. */
async function run(overrides: Partial<DirectCopyRequest> = {}): Promise<CopyOutcome & { files: FileResult[] }> {
  const files: FileResult[] = [];
  const outcome = await copyTree({
    source: fsConnector(src), sourcePath: '/', destination: fsConnector(dst), destinationPath: '/',
    options: options(), resume: false, signal: new AbortController().signal, tuning: FAST_RETRIES,
    ...overrides,
    observer: { fileDone: (r) => files.push(r), ...overrides.observer },
  });
  return { ...outcome, files };
}

const TREE = {
  'readme.txt': 'hello\n',
  'empty.bin': '',
  'données/été/naïve résumé.txt': 'unicode names ✓\n',
  'données/日本語/ファイル.md': '# 見出し\n',
  'deep/a/b/c/d/e/leaf.dat': Buffer.alloc(300_000, 7),
  'emptydir/': '',
  'deep/also-empty/': '',
  'emoji 🚀/rocket.txt': 'to the moon',
};

describe('copy engine on the fs connector', () => {
  test('copies a nested tree byte for byte: unicode names, empty file, empty directories', async () => {
    writeTree(src, TREE);
    const outcome = await run({ destinationPath: '/into/here' });
    expect(outcome.status).toBe('completed');
    expect(snapshot(join(dst, 'into/here'))).toEqual(snapshot(src));
    expect(outcome.counters).toMatchObject({ files_total: 6, files_transferred: 6, files_skipped: 0, files_failed: 0, listing_done: true });
    const bytes = Object.entries(TREE).filter(([p]) => !p.endsWith('/')).reduce((n, [, c]) => n + Buffer.byteLength(c), 0);
    expect(outcome.counters.bytes_transferred).toBe(bytes);
    // Each result carries the SHA-256 of what was read, and how the destination was verified.
    const leaf = outcome.files.find((f) => f.path === 'deep/a/b/c/d/e/leaf.dat');
    expect(leaf).toMatchObject({ status: 'copied', size: 300_000, sha256: sha256(Buffer.alloc(300_000, 7)), verified_by: 'reread' });
    expect(outcome.files.find((f) => f.path === 'empty.bin')).toMatchObject({ status: 'copied', size: 0, sha256: sha256('') });
    expect(partFiles(dst)).toEqual([]);
  });

  test('a single-file source is copied into the destination directory under its name', async () => {
    writeTree(src, { 'dir/report.csv': 'a,b\n1,2\n', 'dir/other.csv': 'x' });
    const outcome = await run({ sourcePath: '/dir/report.csv', destinationPath: '/out' });
    expect(outcome.status).toBe('completed');
    expect(snapshot(dst)).toEqual({ 'out/': 'dir', 'out/report.csv': sha256('a,b\n1,2\n') });
    expect(outcome.files).toEqual([expect.objectContaining({ path: 'report.csv', status: 'copied' })]);
  });

  test('a missing source path fails the job saying so', async () => {
    const outcome = await run({ sourcePath: '/nope' });
    expect(outcome.status).toBe('failed');
    expect(outcome.error).toMatch(/source path \/nope does not exist/);
  });

  test('a destination path that is a file fails the job', async () => {
    writeTree(src, { 'a.txt': 'a' });
    writeTree(dst, { 'target': 'I am a file' });
    const outcome = await run({ destinationPath: '/target' });
    expect(outcome.status).toBe('failed');
    expect(outcome.error).toMatch(/destination path \/target is a file/);
  });

  describe('overwrite policies', () => {
    beforeEach(() => {
      writeTree(src, { 'same.txt': 'same', 'changed.txt': 'new content', 'newer-src.txt': 'abcd', 'only-src.txt': 'fresh' });
      writeTree(dst, { 'same.txt': 'same', 'changed.txt': 'old', 'newer-src.txt': 'wxyz' });
      // newer-src.txt: same size, but the destination is older than the source.
      const old = new Date(Date.now() - 3600_000);
      utimesSync(join(dst, 'newer-src.txt'), old, old);
    });

    test('always: every file is copied', async () => {
      const outcome = await run({ options: options({ overwrite: 'always' }) });
      expect(outcome.counters).toMatchObject({ files_transferred: 4, files_skipped: 0 });
      expect(snapshot(dst)).toEqual(snapshot(src));
    });

    test('never: existing files are left alone, missing ones copied', async () => {
      const outcome = await run({ options: options({ overwrite: 'never' }) });
      expect(outcome.counters).toMatchObject({ files_transferred: 1, files_skipped: 3 });
      expect(readFileSync(join(dst, 'changed.txt'), 'utf8')).toBe('old');
      expect(readFileSync(join(dst, 'only-src.txt'), 'utf8')).toBe('fresh');
    });

    test('if_changed: skips same size and not older; copies a different size or an older destination', async () => {
      const outcome = await run({ options: options({ overwrite: 'if_changed' }) });
      const byPath = Object.fromEntries(outcome.files.map((f) => [f.path, f.status]));
      expect(byPath).toEqual({ 'same.txt': 'skipped', 'changed.txt': 'copied', 'newer-src.txt': 'copied', 'only-src.txt': 'copied' });
      expect(snapshot(dst)).toEqual(snapshot(src));
      // A second run finds everything up to date.
      const again = await run({ options: options({ overwrite: 'if_changed' }) });
      expect(again.counters).toMatchObject({ files_transferred: 0, files_skipped: 4 });
    });

    test('if_changed: equal store checksums skip, different ones copy, whatever the times', async () => {
      const source = new WrappedConnector(fsConnector(src));
      const destination = new WrappedConnector(fsConnector(dst));
      // Pretend both stores report a SHA-256 of their content.
      const withSum = (root: string) => (e: import('../src/connectors/types.js').Entry) =>
        e.kind === 'file' ? { ...e, checksum: { algorithm: 'sha256' as const, value: sha256(readFileSync(join(root, e.path))) } } : e;
      source.mapEntry = withSum(src);
      destination.mapEntry = withSum(dst);
      const outcome = await run({ source, destination });
      const byPath = Object.fromEntries(outcome.files.map((f) => [f.path, f.status]));
      expect(byPath).toEqual({ 'same.txt': 'skipped', 'changed.txt': 'copied', 'newer-src.txt': 'copied', 'only-src.txt': 'copied' });
    });
  });

  test('resume: a file an earlier attempt verified and still there is skipped; a same-size file no attempt wrote follows the policy', async () => {
    writeTree(src, { 'a.txt': 'aaaa', 'b.txt': 'bbbb', 'c/d.txt': 'dddd', 'e.txt': 'eeee', 'f.txt': 'ffff' });
    // a: verified by attempt 1 and there; b: verified but replaced by another size since;
    // e: there with the source's size but no attempt recorded it; c/d, f: missing (f verified, then deleted).
    writeTree(dst, { 'a.txt': 'AAAA', 'b.txt': 'old b', 'e.txt': 'EEEE' });
    const asked: string[][] = [];
    const outcome = await run({
      resume: true, options: options({ overwrite: 'always' }),
      askVerified: async (paths) => {
        asked.push(paths);
        return [{ path: 'a.txt', size: 4, attempt: 1, sha256: sha256('aaaa') }, { path: 'b.txt', size: 4, attempt: 1 }, { path: 'f.txt', size: 4, attempt: 1 }];
      },
    });
    const byPath = Object.fromEntries(outcome.files.map((f) => [f.path, f.status]));
    expect(byPath).toEqual({ 'a.txt': 'skipped', 'b.txt': 'copied', 'c/d.txt': 'copied', 'e.txt': 'copied', 'f.txt': 'copied' });
    expect(outcome.files.find((f) => f.path === 'a.txt')).toEqual({ path: 'a.txt', status: 'skipped', size: 4, sha256: sha256('aaaa'), verified_by: 'attempt 1' });
    expect(asked.flat().sort()).toEqual(['a.txt', 'b.txt', 'c/d.txt', 'e.txt', 'f.txt']);
    expect(snapshot(dst)).toEqual({ 'a.txt': sha256('AAAA'), 'b.txt': sha256('bbbb'), 'c/': 'dir', 'c/d.txt': sha256('dddd'), 'e.txt': sha256('eeee'), 'f.txt': sha256('ffff') });
  });

  test('resume without an answer on earlier attempts follows the overwrite policy, never the size alone', async () => {
    writeTree(src, { 'a.txt': 'aaaa', 'b.txt': 'bbbb' });
    writeTree(dst, { 'a.txt': 'AAAA' });
    let queries = 0;
    const outcome = await run({
      resume: true, options: options({ overwrite: 'always' }),
      askVerified: async () => { queries++; throw new Error('no answer from the control plane within 10 ms'); },
    });
    expect(outcome.status).toBe('completed');
    expect(outcome.files.map((f) => [f.path, f.status]).sort()).toEqual([['a.txt', 'copied'], ['b.txt', 'copied']]);
    expect(queries).toBe(1); // a failed lookup is not asked again in the same run
    expect(readFileSync(join(dst, 'a.txt'), 'utf8')).toBe('aaaa');
  });

  test('resume asks in bounded batches as files are listed', async () => {
    const tree: Record<string, string> = {};
    for (let i = 0; i < 1200; i++) tree[`d${i % 7}/f${i}.txt`] = `${i}`;
    writeTree(src, tree);
    const sizes: number[] = [];
    const outcome = await run({ resume: true, askVerified: async (paths) => { sizes.push(paths.length); return []; } });
    expect(outcome.status).toBe('completed');
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(1200);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(500);
  });

  test('a write that corrupts a byte is caught by the re-read, retried, and fails the file without leaving it', async () => {
    writeTree(src, { 'good.txt': 'fine', 'bad.bin': Buffer.alloc(200_000, 1) });
    const destination = new WrappedConnector(fsConnector(dst));
    let corruptWrites = 0;
    destination.beforeWrite = (path) => {
      if (!path.includes('bad.bin')) return;
      corruptWrites++;
      return corruptByteAt(123_456);
    };
    const outcome = await run({ destination });
    expect(outcome.status).toBe('failed');
    expect(corruptWrites).toBe(4); // first attempt + 3 retries
    expect(outcome.error).toBe('1 file failed: bad.bin (the written file read back does not match the bytes sent (sha256) (after 4 attempts))');
    expect(snapshot(dst)).toEqual({ 'good.txt': sha256('fine') });
  });

  test('a store checksum that does not match fails the file without a re-read', async () => {
    writeTree(src, { 'x.bin': 'payload' });
    const destination = new WrappedConnector(fsConnector(dst));
    destination.afterWrite = (_path, result) => ({ ...result, checksum: { algorithm: 'sha256', value: sha256('something else') } });
    const outcome = await run({ destination, options: options({ verify: 'checksum' }) });
    expect(outcome.files[0]).toMatchObject({ path: 'x.bin', status: 'failed' });
    expect(outcome.files[0]?.error).toMatch(/sha256 of the written file does not match/);
    expect(snapshot(dst)).toEqual({});
  });

  test("a connector's own read-back (WriteOptions.readBack) is used instead of opening the file again, and a mismatch fails the file", async () => {
    writeTree(src, { 'x.bin': 'payload', 'y.bin': 'other' });
    const destination = new WrappedConnector(fsConnector(dst));
    const asked: boolean[] = [];
    let reads = 0;
    destination.onRead = (_path, stream) => {
      reads++;
      return stream;
    };
    // What the store holds, hashed from the written (temporary) file as a connector would read it back; y's says other bytes.
    destination.afterWrite = (path, result) => {
      const held = readFileSync(join(dst, path));
      return { ...result, readBack: { sha256: path.includes('y.bin') ? sha256('not what was sent') : sha256(held), bytes: held.length } };
    };
    const write = destination.write.bind(destination);
    destination.write = (path, body, o) => {
      asked.push((o as { readBack?: boolean }).readBack === true);
      return write(path, body, o);
    };
    const outcome = await run({ destination, options: options({ verify: 'checksum' }) });
    const byPath = Object.fromEntries(outcome.files.map((f) => [f.path, f]));
    expect(byPath['x.bin']).toMatchObject({ status: 'copied', verified_by: 'reread' });
    expect(byPath['y.bin']).toMatchObject({ status: 'failed', error: expect.stringMatching(/read back does not match/) });
    expect(reads).toBe(0);
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.every(Boolean)).toBe(true);
    expect(Object.keys(snapshot(dst))).toEqual(['x.bin']);
  });

  test('without rename (an object store), writes go to the final name and the MD5 the store reports is compared', async () => {
    writeTree(src, { 'a/obj1.bin': Buffer.alloc(70_000, 9), 'obj2.txt': 'two' });
    const destination = new WrappedConnector(fsConnector(dst), { rename: false, directories: false });
    const written: string[] = [];
    destination.afterWrite = (path, result) => {
      written.push(path);
      const md5 = createHash('md5').update(readFileSync(join(dst, path))).digest('hex');
      return { ...result, checksum: { algorithm: 'etag', value: md5 } };
    };
    const outcome = await run({ destination });
    expect(outcome.status).toBe('completed');
    expect(written.sort()).toEqual(['a/obj1.bin', 'obj2.txt']);
    expect(outcome.files.map((f) => f.verified_by)).toEqual(['etag', 'etag']);
    expect(snapshot(dst)).toEqual(snapshot(src));
  });

  test('without rename, a corrupted object is removed from its final name', async () => {
    writeTree(src, { 'obj.bin': Buffer.alloc(10_000, 5) });
    const destination = new WrappedConnector(fsConnector(dst), { rename: false, directories: false });
    destination.beforeWrite = () => corruptByteAt(10);
    const outcome = await run({ destination });
    expect(outcome.files[0]).toMatchObject({ status: 'failed', error: expect.stringMatching(/does not match/) });
    expect(snapshot(dst)).toEqual({});
  });

  test('verify=size trusts a matching size (no re-read)', async () => {
    writeTree(src, { 'x.bin': 'payload' });
    const outcome = await run({ options: options({ verify: 'size' }) });
    expect(outcome.files[0]).toMatchObject({ status: 'copied', verified_by: 'size' });
  });

  test('transient write failures are retried and the file then succeeds', async () => {
    writeTree(src, { 'flaky.txt': 'eventually', 'steady.txt': 'ok' });
    const destination = new WrappedConnector(fsConnector(dst));
    let failures = 0;
    destination.beforeWrite = (path) => {
      if (path.includes('flaky') && failures < 2) {
        failures++;
        throw new ConnectorError('TRANSIENT', 'connection reset');
      }
    };
    const outcome = await run({ destination });
    expect(outcome.status).toBe('completed');
    expect(failures).toBe(2);
    expect(snapshot(dst)).toEqual(snapshot(src));
  });

  test('a transient source error mid-stream is retried from the start', async () => {
    writeTree(src, { 'big.bin': Buffer.alloc(1_000_000, 3) });
    const source = new WrappedConnector(fsConnector(src));
    let broken = 0;
    source.onRead = (_path, stream) => {
      if (broken++ > 0) return stream;
      let seen = 0;
      const breaking = new Transform({
        transform(chunk: Buffer, _enc, callback) {
          seen += chunk.length;
          callback(seen > 300_000 ? new ConnectorError('TRANSIENT', 'socket hang up') : null, chunk);
        },
      });
      breaking.on('close', () => stream.destroy());
      return stream.pipe(breaking);
    };
    const outcome = await run({ source });
    expect(outcome.status).toBe('completed');
    expect(broken).toBe(2);
    expect(outcome.counters.bytes_transferred).toBe(1_000_000);
    expect(snapshot(dst)).toEqual(snapshot(src));
  });

  test('a permanent failure fails that file at once; the others are copied and the job names it', async () => {
    writeTree(src, { 'a.txt': 'a', 'locked/secret.txt': 's', 'z.txt': 'z' });
    const destination = new WrappedConnector(fsConnector(dst));
    let attempts = 0;
    destination.beforeWrite = (path) => {
      if (path.includes('secret')) {
        attempts++;
        throw new ConnectorError('PERMISSION', 'locked/secret.txt: permission denied');
      }
    };
    const outcome = await run({ destination });
    expect(outcome.status).toBe('failed');
    expect(attempts).toBe(1);
    expect(outcome.error).toBe('1 file failed: locked/secret.txt (locked/secret.txt: permission denied)');
    expect(outcome.counters).toMatchObject({ files_total: 3, files_transferred: 2, files_failed: 1 });
    expect(Object.keys(snapshot(dst))).toEqual(['a.txt', 'locked/', 'z.txt']);
  });

  test('the job error names the first five failing files and counts the rest', async () => {
    writeTree(src, Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`f${i}.txt`, `${i}`])));
    const destination = new WrappedConnector(fsConnector(dst));
    destination.beforeWrite = () => { throw new ConnectorError('PERMISSION', 'read-only'); };
    const outcome = await run({ destination, options: options({ concurrency: 1 }) });
    expect(outcome.error).toMatch(/^8 files failed: (f\d\.txt \(read-only\); ){5}and 3 more$/);
  });

  test('a source that changes size during the copy fails that file', async () => {
    writeTree(src, { 'growing.log': 'line 1\nline 2\n', 'ok.txt': 'ok' });
    const source = new WrappedConnector(fsConnector(src));
    // The listing saw the file smaller than it is by the time it is read.
    source.mapEntry = (e) => (e.path === 'growing.log' ? { ...e, size: 7 } : e);
    const outcome = await run({ source });
    expect(outcome.files.find((f) => f.path === 'growing.log')).toMatchObject({ status: 'failed', error: expect.stringMatching(/source changed during copy/) });
    expect(snapshot(dst)).toEqual({ 'ok.txt': sha256('ok') });
  });

  test('cancel mid-copy of a large file leaves neither a .part file nor a partial file', async () => {
    const big = join(src, 'huge.img');
    const fd = openSync(big, 'w');
    ftruncateSync(fd, 256 * 1024 * 1024); // sparse: no disk used on the source side
    closeSync(fd);
    writeFileSync(join(src, 'small.txt'), 'small');
    const controller = new AbortController();
    const outcome = await run({
      signal: controller.signal,
      options: options({ concurrency: 1 }),
      observer: {
        changed: (c) => {
          if (c.bytes_transferred > 8 * 1024 * 1024) controller.abort();
        },
      },
    });
    expect(outcome.status).toBe('cancelled');
    expect(existsSync(join(dst, 'huge.img'))).toBe(false);
    expect(partFiles(dst)).toEqual([]);
  });

  test('concurrency bound: never more writes at once than asked, and the listing is read only a little ahead', async () => {
    writeTree(src, Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`d${i % 3}/f${i}.txt`, `file ${i}`])));
    const source = new WrappedConnector(fsConnector(src));
    const destination = new WrappedConnector(fsConnector(dst));
    let finished = 0;
    let maxAhead = 0;
    // Hold each write until three are in flight (proof that the engine reaches the bound), with a
    // fallback release for the last files of the run, when fewer than three remain.
    let waiting: (() => void)[] = [];
    destination.beforeWrite = async () => {
      maxAhead = Math.max(maxAhead, source.listed - finished);
      if (destination.writesInFlight >= 3) {
        for (const release of waiting) release();
        waiting = [];
        return;
      }
      await new Promise<void>((resolve) => {
        waiting.push(resolve);
        setTimeout(resolve, 200);
      });
    };
    const outcome = await run({ source, destination, options: options({ concurrency: 3 }), observer: { fileDone: () => { finished++; } } });
    expect(outcome.status).toBe('completed');
    expect(destination.maxWritesInFlight).toBe(3);
    // 3 running + 3 queued + the entry being handed over (+ directory entries).
    expect(maxAhead).toBeLessThanOrEqual(3 + 3 + 1 + 3);
  });
});

import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Transform } from 'node:stream';
import type { FileResult } from '@xfer/shared';
import { ConnectorError } from '../src/connectors/types.js';
import { copyTree } from '../src/copy/copy-engine.js';
import type { MultiStreamTuning } from '../src/copy/multi-stream.js';
import type { CopyOutcome } from '../src/copy/types.js';
import { FAST_RETRIES, fsConnector, options, rmTemp, sha256, tempDir } from './helpers/tree.js';
import { WrappedConnector } from './helpers/wrapped-connector.js';

/**
 * Several streams per large file (copy/multi-stream.ts) through the engine, on real files: ranged
 * reads at once, handed on in order, a failing range read again, a run's memory budget kept.
 */
const MiB = 1024 * 1024;
const SMALL_STREAMS: MultiStreamTuning = { cutoffBytes: 2 * MiB, streams: 4, segmentBytes: MiB, budgetBytes: 4 * MiB };

let src: string;
let dst: string;
beforeEach(() => {
  src = tempDir('xfer-ms-src-');
  dst = tempDir('xfer-ms-dst-');
});
afterEach(() => {
  rmTemp(src);
  rmTemp(dst);
});

/** The source wrapped: every read's range and how many were open at once; `fail` may break one. */
function source(fail?: (range: { start?: number; end?: number }) => boolean) {
  // A local disk gains nothing from several streams; here it stands for a network store.
  const local = fsConnector(src);
  const wrapped = new WrappedConnector(local, { ...local.capabilities, parallelReads: true });
  const ranges: string[] = [];
  let open = 0;
  let maxOpen = 0;
  wrapped.onRead = (path, stream, range) => {
    ranges.push(`${path} ${range.start ?? 0}-${range.end ?? ''}`);
    open++;
    maxOpen = Math.max(maxOpen, open);
    stream.once('close', () => { open--; });
    if (!fail?.(range)) return stream;
    // Half the range, then a transient fault: what a dropped connection does mid-read.
    let passed = 0;
    const half = ((range.end ?? 0) - (range.start ?? 0) + 1) / 2;
    const breaking = new Transform({
      transform(chunk: Buffer, _enc, done) {
        passed += chunk.length;
        if (passed > half) done(new ConnectorError('TRANSIENT', 'read: connection reset (injected)'));
        else done(null, chunk);
      },
    });
    stream.on('error', (err) => breaking.destroy(err));
    breaking.once('close', () => stream.destroy());
    return stream.pipe(breaking);
  };
  return { wrapped, ranges, maxOpen: () => maxOpen };
}

async function run(from: WrappedConnector, concurrency = 4): Promise<CopyOutcome & { files: FileResult[] }> {
  const files: FileResult[] = [];
  const outcome = await copyTree({
    source: from, sourcePath: '/', destination: fsConnector(dst), destinationPath: '/', options: options({ concurrency }), resume: false,
    signal: new AbortController().signal, tuning: { ...FAST_RETRIES, multiStream: SMALL_STREAMS }, observer: { fileDone: (r) => files.push(r) },
  });
  return { ...outcome, files };
}

test('a large file whose size is no multiple of the segment: read as ranges at once, one failing half-way and read again; byte-identical', async () => {
  const data = randomBytes(5 * MiB + 12_345);
  writeFileSync(join(src, 'big.bin'), data);
  let failed = false;
  const from = source((range) => {
    if (failed || range.start !== 2 * MiB) return false;
    failed = true;
    return true;
  });
  const outcome = await run(from.wrapped);
  expect(outcome.status).toBe('completed');
  expect(outcome.files).toEqual([expect.objectContaining({ path: 'big.bin', status: 'copied', sha256: sha256(data) })]);
  expect(sha256(readFileSync(join(dst, 'big.bin')))).toBe(sha256(data));
  // Six segments, the last a short one; the third twice (the injected fault); up to four at once.
  const expected = [0, 1, 2, 3, 4, 5].map((i) => `big.bin ${i * MiB}-${Math.min(data.length, (i + 1) * MiB) - 1}`);
  expect([...from.ranges].sort()).toEqual([...expected, expected[2]!].sort());
  expect(from.maxOpen()).toBeGreaterThan(1);
  expect(from.maxOpen()).toBeLessThanOrEqual(4);
});

test('small files are read whole; a range that keeps failing fails the attempt and the engine retries the file', async () => {
  writeFileSync(join(src, 'small.bin'), randomBytes(MiB));
  const data = randomBytes(3 * MiB);
  writeFileSync(join(src, 'big.bin'), data);
  let failures = 0;
  // The first four reads of the range at 1 MiB fail: its own retries (3) give out, then the file's retry reads it all again.
  const from = source((range) => range.start === MiB && ++failures <= 4);
  const outcome = await run(from.wrapped);
  expect(outcome.status).toBe('completed');
  expect(from.ranges.filter((r) => r.startsWith('small.bin'))).toEqual(['small.bin 0-']);
  expect(sha256(readFileSync(join(dst, 'big.bin')))).toBe(sha256(data));
  expect(from.ranges.filter((r) => r === `big.bin ${MiB}-${2 * MiB - 1}`)).toHaveLength(5);
});

test("a run's segments stay within its budget, whatever the number of large files at once", async () => {
  for (let i = 0; i < 4; i++) writeFileSync(join(src, `f${i}.bin`), randomBytes(4 * MiB + i));
  const from = source();
  const outcome = await run(from.wrapped, 4);
  expect(outcome.status).toBe('completed');
  expect(outcome.counters.files_transferred).toBe(4);
  // 4 MiB of 1 MiB segments: never more than four ranges open at once, over all four files.
  expect(from.maxOpen()).toBeLessThanOrEqual(4);
  for (let i = 0; i < 4; i++) expect(readFileSync(join(dst, `f${i}.bin`)).length).toBe(4 * MiB + i);
});

import { existsSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { copyTree } from '../src/copy/copy-engine.js';
import { parseTempName, runTag } from '../src/copy/leftovers.js';
import { tempPathFor } from '../src/copy/write-side.js';
import { FAST_RETRIES, fsConnector, options, sourceAndDestination, writeTree } from './helpers/tree.js';

/** The clean-up of temporary files left by earlier runs (a killed agent), on the fs connector (a store with rename). */
const dirs = sourceAndDestination();

const JOB = '65a1b2c3d4e5f60718293a4b';
const OTHER = '65a1b2c3d4e5f60718293a4c';

test('temporary names say which job and attempt wrote them', () => {
  const start = Date.UTC(2026, 10, 29, 8, 0, 0);
  const name = tempPathFor('dir/report.pdf', { jobId: JOB, attempt: 3 }, start);
  expect(name).toMatch(new RegExp(`^dir/\\.report\\.pdf\\.xfer-${runTag({ jobId: JOB, attempt: 3 })}-t[0-9a-z]+-[0-9a-f]{12}\\.part$`));
  expect(parseTempName(name.slice(4))).toEqual({ job: runTag({ jobId: JOB, attempt: 3 }).slice(0, 11), attempt: 3, startedAt: start });
  expect(parseTempName('.report.pdf.xfer-0123456789ab.part')).toEqual({ job: null, attempt: null });
  expect(parseTempName('report.part')).toBeNull();
});

test("a retry removes its job's earlier temporaries and stale ones of anyone; fresh ones of other jobs and the user's files stay", async () => {
  const { src, dst } = dirs;
  writeTree(src, { 'a/one.txt': 'one', 'two.txt': 'two' });
  const earlier = tempPathFor('a/one.txt', { jobId: JOB, attempt: 1 });
  const otherJob = tempPathFor('a/one.txt', { jobId: OTHER, attempt: 1 });
  const staleOld = 'deep/.x.bin.xfer-0123456789ab.part';
  const freshOld = '.y.bin.xfer-ba9876543210.part';
  writeTree(dst, {
    [earlier]: 'partial', [otherJob]: 'other job, still writing', [staleOld]: 'stale', [freshOld]: 'fresh',
    'mine.part': 'a user file', 'deep/.hidden.xfer-notours.part': 'not an xfer name',
  });
  const hoursAgo = new Date(Date.now() - 2 * 3600_000);
  utimesSync(join(dst, staleOld), hoursAgo, hoursAgo);
  // Another job's finished write, not renamed yet: it kept its source's old mtime (issue 25), but
  // its name says the write started a moment ago, so it is alive.
  const keptOldTime = tempPathFor('a/two.txt', { jobId: OTHER, attempt: 1 });
  writeTree(dst, { [keptOldTime]: 'written, verifying' });
  utimesSync(join(dst, keptOldTime), hoursAgo, hoursAgo);
  // An abandoned one of this agent's names: started and last written hours ago.
  const staleNew = tempPathFor('b/three.txt', { jobId: OTHER, attempt: 1 }, hoursAgo.getTime());
  writeTree(dst, { [staleNew]: 'abandoned' });
  utimesSync(join(dst, staleNew), hoursAgo, hoursAgo);

  const outcome = await copyTree({
    source: fsConnector(src), sourcePath: '/', destination: fsConnector(dst), destinationPath: '/',
    options: options(), resume: true, run: { jobId: JOB, attempt: 2 }, signal: new AbortController().signal, tuning: FAST_RETRIES,
  });
  expect(outcome.status).toBe('completed');
  expect(existsSync(join(dst, earlier))).toBe(false);
  expect(existsSync(join(dst, staleOld))).toBe(false);
  expect(existsSync(join(dst, staleNew))).toBe(false);
  for (const kept of [otherJob, keptOldTime, freshOld, 'mine.part', 'deep/.hidden.xfer-notours.part']) expect(existsSync(join(dst, kept))).toBe(true);
  expect(existsSync(join(dst, 'a/one.txt'))).toBe(true);
});

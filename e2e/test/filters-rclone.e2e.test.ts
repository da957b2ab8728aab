import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import fc from 'fast-check';
import { defaultCacheDir } from '@xfer/control-plane';
import { checkFilterOptions, compileFilters, type FileFilter, type FilterOptions } from '@xfer/shared';
import { ensureRclone } from '../src/tools/rclone.js';

/**
 * Property test of shared/src/filters against the real rclone (issue 25: "the same set of
 * paths"): on generated trees (names with spaces, dots, brackets, braces, commas, unicode; nested
 * and empty directories; sizes and modification times) and generated rule lists, `rclone lsf -R
 * --files-only --filter …` (with --min-size/--max-size/--min-age/--max-age) lists exactly the
 * files our walk keeps, the walk pruning directories with includeDirectory as the agent does; and
 * below a directory includeDirectory refuses, rclone lists nothing.
 */

const execFileAsync = promisify(execFile);
const RUNS = 80;
const HOUR = 3600;

let rclone: string;
let work: string;

beforeAll(async () => {
  rclone = await ensureRclone({ cacheDir: defaultCacheDir(process.env), env: process.env, log: (msg) => process.stderr.write(`${msg}\n`) });
  work = await mkdtemp(join(tmpdir(), 'xfer-filters-rclone-'));
}, 300_000);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

// ---- trees ----

/** Pieces of names: glob-special characters (which the local backend keeps as they are on Linux), unicode, dots, spaces. */
const NAME_PIECES = ['a', 'b', 'ab', 'ba', 'a.b', '.x', ' ', 'é', '日本', '😀', '[1]', '{b}', 'c,d', 'x y', '*', '?', 'a\\b'];
const nameArb = fc.array(fc.constantFrom(...NAME_PIECES), { minLength: 1, maxLength: 2 })
  .map((p) => p.join(''))
  .filter((n) => n !== '.' && n !== '..');

interface TreeFile { path: string; size: number; ageHours: number }
interface Tree { files: TreeFile[]; emptyDirs: string[] }

const treeArb: fc.Arbitrary<Tree> = fc.record({
  files: fc.array(fc.record({
    dirs: fc.array(nameArb, { maxLength: 3 }),
    name: nameArb,
    size: fc.integer({ min: 0, max: 40 }),
    ageHours: fc.integer({ min: 0, max: 60 }),
  }), { minLength: 1, maxLength: 30 }),
  emptyDirs: fc.array(fc.array(nameArb, { minLength: 1, maxLength: 3 }), { maxLength: 4 }),
}).map(({ files, emptyDirs }) => {
  // Keep the entries that fit: a path is either a file or a directory.
  const kinds = new Map<string, 'file' | 'dir'>();
  const fits = (segments: string[], leaf: 'file' | 'dir'): boolean => {
    for (let i = 1; i <= segments.length; i++) {
      const kind = kinds.get(segments.slice(0, i).join('/'));
      if (kind === 'file' || (i === segments.length && kind !== undefined && (leaf === 'file' || kind !== 'dir'))) return false;
    }
    for (let i = 1; i < segments.length; i++) kinds.set(segments.slice(0, i).join('/'), 'dir');
    kinds.set(segments.join('/'), leaf);
    return true;
  };
  const tree: Tree = { files: [], emptyDirs: [] };
  for (const f of files) {
    const segments = [...f.dirs, f.name];
    if (fits(segments, 'file')) tree.files.push({ path: segments.join('/'), size: f.size, ageHours: f.ageHours });
  }
  for (const d of emptyDirs) if (fits(d, 'dir')) tree.emptyDirs.push(d.join('/'));
  return tree;
});

function directoriesOf(tree: Tree): Set<string> {
  const dirs = new Set<string>();
  for (const path of [...tree.files.map((f) => f.path.split('/').slice(0, -1).join('/')), ...tree.emptyDirs]) {
    const segments = path === '' ? [] : path.split('/');
    for (let i = 1; i <= segments.length; i++) dirs.add(segments.slice(0, i).join('/'));
  }
  return dirs;
}

// ---- rules ----

/** A name piece as a glob literal: rclone's specials and `,` escaped with `\`. */
const literal = (piece: string): string => piece.replace(/[[\]{}*?\\,]/g, (c) => `\\${c}`);
const classArb = fc.tuple(fc.boolean(), fc.array(fc.constantFrom('a', 'b', 'é', '日', ' ', '.', 'a-c', 'x-z', '[:alpha:]', '\\d'), { minLength: 1, maxLength: 3 }))
  .map(([negate, items]) => `[${negate ? '^' : ''}${items.join('')}]`);
const simpleTokenArb = fc.oneof(
  { weight: 5, arbitrary: fc.constantFrom(...NAME_PIECES).map(literal) },
  { weight: 2, arbitrary: fc.constant('*') },
  { weight: 1, arbitrary: fc.constant('?') },
  { weight: 1, arbitrary: classArb },
);
const alternationArb = fc.array(
  fc.oneof(
    { weight: 3, arbitrary: fc.array(simpleTokenArb, { maxLength: 2 }).map((t) => t.join('')) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...NAME_PIECES), fc.constantFrom('*', '**', 'a')).map(([a, b]) => `${literal(a)}/${b}`) },
  ),
  { minLength: 1, maxLength: 3 },
).map((alts) => `{${alts.join(',')}}`);
const tokenArb = fc.oneof(
  { weight: 8, arbitrary: simpleTokenArb },
  { weight: 2, arbitrary: fc.constant('**') },
  { weight: 2, arbitrary: alternationArb },
);
const segmentArb = fc.array(tokenArb, { minLength: 1, maxLength: 3 }).map((t) => t.join(''));
const patternArb = fc.tuple(fc.boolean(), fc.array(segmentArb, { minLength: 1, maxLength: 3 }), fc.integer({ min: 0, max: 3 }))
  .map(([anchored, segments, ending]) => `${anchored ? '/' : ''}${segments.join('/')}${ending === 0 ? '/' : ''}`)
  // `***` is refused by rclone and by us alike (checked in shared/src/filters/glob.test.ts).
  .filter((p) => !p.includes('***'));
/** A pattern made from a path of the tree: segments kept, starred, replaced by `**`, or given alternatives; a suffix of it, or all of it anchored. */
function patternFromPathArb(path: string): fc.Arbitrary<string> {
  const segments = path.split('/');
  return fc.tuple(
    fc.integer({ min: 0, max: segments.length - 1 }),
    fc.array(fc.constantFrom('keep', 'keep', 'keep', 'star', 'globstar', 'question', 'alternation', 'prefix'), { minLength: segments.length, maxLength: segments.length }),
    fc.constantFrom(...NAME_PIECES),
    fc.boolean(),
  ).map(([from, how, other, dirOnly]) => {
    const out = segments.slice(from).map((segment, i) => {
      const chars = Array.from(segment);
      switch (how[i]) {
        case 'star': return '*';
        case 'globstar': return '**';
        case 'question': return chars.map((c, j) => (j === 0 ? '?' : literal(c))).join('');
        case 'alternation': return `{${literal(segment)},${literal(other)}}`;
        case 'prefix': return `${literal(chars[0]!)}*`;
        default: return literal(segment);
      }
    });
    // A directory-only pattern names a directory: drop the file name.
    const dirPattern = dirOnly && out.length > 1;
    const body = (dirPattern ? out.slice(0, -1) : out).join('/');
    return `${from === 0 && !dirPattern ? '/' : ''}${body}${dirPattern ? '/' : ''}`;
  }).filter((p) => !p.includes('***'));
}

function rulesArb(tree: Tree): fc.Arbitrary<string[]> {
  const paths = tree.files.map((f) => f.path);
  const pattern = fc.oneof({ weight: 1, arbitrary: patternArb }, { weight: 2, arbitrary: fc.constantFrom(...paths).chain(patternFromPathArb) });
  // A rule ending with whitespace is refused (shared/src/filters/rules.ts says why).
  const rule = fc.tuple(fc.constantFrom('+', '-'), pattern).map(([sign, p]) => `${sign} ${p}`).filter((r) => !/\s$/u.test(r));
  return fc.tuple(
    fc.array(rule, { minLength: 0, maxLength: 5 }),
    fc.constantFrom(undefined, undefined, undefined, undefined, '- *', '- **', '+ **', '- /**'),
  ).map(([rules, last]) => (last ? [...rules, last] : rules));
}

/** Present one time in four. */
const sometimes = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> =>
  fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: arb });

const boundsArb = fc.record({
  min_size: sometimes(fc.integer({ min: 0, max: 40 })),
  max_size: sometimes(fc.integer({ min: 0, max: 40 })),
  min_age: sometimes(fc.integer({ min: 0, max: 60 }).map((h) => h * HOUR)),
  max_age: sometimes(fc.integer({ min: 0, max: 60 }).map((h) => h * HOUR)),
}).map((b) => {
  // Bounds that keep nothing are refused (checkFilterOptions, and rclone for the ages, equal ones
  // included): order them.
  const bounds: FilterOptions = {};
  let { min_size: minSize, max_size: maxSize, min_age: minAge, max_age: maxAge } = b;
  if (minSize !== undefined && maxSize !== undefined && minSize > maxSize) [minSize, maxSize] = [maxSize, minSize];
  if (minAge !== undefined && maxAge !== undefined && minAge >= maxAge) [minAge, maxAge] = [maxAge, minAge + HOUR];
  if (minSize !== undefined) bounds.min_size = minSize;
  if (maxSize !== undefined) bounds.max_size = maxSize;
  if (minAge !== undefined) bounds.min_age = minAge;
  if (maxAge !== undefined) bounds.max_age = maxAge;
  return bounds;
});

// ---- the two sides ----

async function writeTreeAt(root: string, tree: Tree, now: number): Promise<void> {
  await mkdir(root, { recursive: true });
  for (const f of tree.files) {
    const full = join(root, ...f.path.split('/'));
    await mkdir(join(full, '..'), { recursive: true });
    await writeFile(full, Buffer.alloc(f.size, 0x61));
    // Half an hour off the whole hours the age bounds use: clock drift between the two runs never crosses a bound.
    const mtime = (now - f.ageHours * HOUR * 1000 - 1800_000) / 1000;
    await utimes(full, mtime, mtime);
  }
  for (const d of tree.emptyDirs) await mkdir(join(root, ...d.split('/')), { recursive: true });
}

async function rcloneList(root: string, options: FilterOptions): Promise<string[]> {
  const args = ['lsf', '-R', '--files-only', '--config', '', ...(options.rules ?? []).map((r) => `--filter=${r}`)];
  if (options.min_size !== undefined) args.push(`--min-size=${options.min_size}B`);
  if (options.max_size !== undefined) args.push(`--max-size=${options.max_size}B`);
  if (options.min_age !== undefined) args.push(`--min-age=${options.min_age}s`);
  if (options.max_age !== undefined) args.push(`--max-age=${options.max_age}s`);
  args.push(root);
  const { stdout } = await execFileAsync(rclone, args, { maxBuffer: 16 << 20, env: { ...process.env, RCLONE_CONFIG: '' } });
  return stdout.split('\n').filter((l) => l !== '').sort();
}

/** Our side: the walk the agent does, pruning refused directories, keeping the files includeFile keeps. */
async function ourList(root: string, filter: FileFilter): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    for (const entry of await readdir(join(root, rel), { withFileTypes: true })) {
      const path = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) {
        if (filter.includeDirectory(path)) await walk(path);
      } else {
        const { size, mtime } = await stat(join(root, path));
        if (filter.includeFile(path, size, mtime)) out.push(path);
      }
    }
  };
  await walk('');
  return out.sort();
}

describe('filters against rclone lsf', () => {
  it(`lists the same files as rclone ${RUNS} times, and rclone lists nothing below a pruned directory`, async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(treeArb.chain((tree) => fc.tuple(fc.constant(tree), rulesArb(tree), boundsArb)), async ([tree, rules, bounds]) => {
        const options: FilterOptions = { ...bounds, ...(rules.length > 0 ? { rules } : {}) };
        expect(checkFilterOptions(options)).toBeNull();
        const root = join(work, `run-${run++}`);
        const now = Date.now();
        try {
          await writeTreeAt(root, tree, now);
          const filter = compileFilters(options, new Date(now));
          const theirs = await rcloneList(root, options);
          expect({ options, files: await ourList(root, filter) }).toEqual({ options, files: theirs });
          // Every directory of the tree, pruned walk or not: where includeDirectory says no, rclone lists nothing below.
          for (const dir of directoriesOf(tree)) {
            if (!filter.includeDirectory(dir)) expect({ options, dir, below: theirs.filter((p) => p.startsWith(`${dir}/`)) }).toEqual({ options, dir, below: [] });
          }
        } finally {
          await rm(root, { recursive: true, force: true });
        }
      }),
      { numRuns: RUNS },
    );
  }, 240_000);
});

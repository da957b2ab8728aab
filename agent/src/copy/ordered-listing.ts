import type { FileFilter } from '@xfer/shared';
import { baseName, joinRel, parentOf, relativePath } from '../connectors/paths.js';
import type { Connector, Entry } from '../connectors/types.js';
import { CopyJobError } from './errors.js';

/**
 * One entry of an ordered listing: its path relative to the listed root, and its sort key (the
 * path, with a `/` after a directory's, so a directory sorts where its contents do: `a-b` < `a/`
 * < `a/x` < `a0`, the order of an object store's keys).
 */
export interface ListedEntry {
  path: string;
  key: string;
  entry: Entry;
}

/**
 * Orders two keys by their UTF-8 bytes (what object stores list by), which is code point order.
 * JavaScript's `<` compares UTF-16 units: it differs for a surrogate pair against a BMP character
 * at U+E000 or above, so the first differing unit is mapped to code point order.
 */
export function compareKeys(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

function codePointRank(unit: number): number {
  if (unit >= 0xe000) return unit - 0x800;
  if (unit >= 0xd800) return unit + 0x2000;
  return unit;
}

export function keyOf(path: string, entry: Entry): string {
  return entry.kind === 'directory' ? `${path}/` : path;
}

/** What to list: a connector, the root on it, and the run's filter (directories it excludes are never listed). */
export interface OrderedListingOptions {
  connector: Connector;
  /** The root, as the transfer names it (a directory; a file is listed as itself, named by its base name). */
  root: string;
  filter: FileFilter;
  signal: AbortSignal;
  /** What a missing root is: an error (a source) or an empty tree (a destination not created yet). */
  missing: 'fail' | 'empty';
  /** Called after each directory listed (tests count listing calls). */
  onListed?: (directory: string) => void;
}

/**
 * The tree under `root`, in full-path byte order (`compareKeys` of `keyOf`), with bounded memory,
 * the filter applied: excluded files are left out, excluded directories neither yielded nor listed.
 *
 * - Object stores (`capabilities.directories` false) list recursively in key order already: the
 *   listing passes through, checked as it goes (a store that breaks the order fails the run: a
 *   comparison of unordered listings would delete what it should not). An excluded "directory" is
 *   a key prefix: its keys are skipped (a store lists by prefix, not by directory).
 * - File stores are walked one directory at a time (non-recursive `list`), each directory sorted
 *   by key and its subdirectories walked at their place: memory is one directory per depth.
 *
 * A listing error ends the iteration with that error: a partial listing must never be taken for
 * a complete one (a sync would delete what it did not see).
 */
export async function* orderedListing(o: OrderedListingOptions): AsyncGenerator<ListedEntry> {
  const root = relativePath(o.root);
  const top = await o.connector.stat(root, { signal: o.signal });
  if (!top) {
    if (o.missing === 'fail') throw new CopyJobError(`source path ${o.root} does not exist`);
    return;
  }
  if (top.kind === 'file') {
    if (o.missing === 'empty') throw new CopyJobError(`destination path ${o.root} is a file, not a directory`);
    const name = baseName(root);
    if (o.filter.includeFile(name, top.size, top.modifiedAt)) yield { path: name, key: name, entry: top };
    return;
  }
  if (o.connector.capabilities.directories) yield* walkDirectories(o, root);
  else yield* passKeyOrder(o, root);
}

async function* walkDirectories(o: OrderedListingOptions, root: string): AsyncGenerator<ListedEntry> {
  // One sorted directory per depth; a frame's `next` is the index of its next entry.
  const stack: { entries: ListedEntry[]; next: number }[] = [{ entries: await listOne(o, root, ''), next: 0 }];
  while (stack.length > 0) {
    const frame = stack.at(-1)!;
    if (frame.next >= frame.entries.length) {
      stack.pop();
      continue;
    }
    const listed = frame.entries[frame.next++]!;
    yield listed;
    if (listed.entry.kind === 'directory') stack.push({ entries: await listOne(o, joinRel(root, listed.path), listed.path), next: 0 });
  }
}

/** One directory's entries, filtered and sorted by key. */
async function listOne(o: OrderedListingOptions, dir: string, relDir: string): Promise<ListedEntry[]> {
  const prefix = dir === '' ? '' : `${dir}/`;
  const out: ListedEntry[] = [];
  for await (const entry of o.connector.list(dir, { recursive: false, signal: o.signal })) {
    const rest = entry.path.startsWith(prefix) ? entry.path.slice(prefix.length) : '';
    if (rest === '' || rest.includes('/')) {
      throw new CopyJobError(`the store listed ${JSON.stringify(entry.path)} in ${JSON.stringify(dir)}, which is not one of its entries`);
    }
    const path = joinRel(relDir, rest);
    if (entry.kind === 'directory' ? !o.filter.includeDirectory(path) : !o.filter.includeFile(path, entry.size, entry.modifiedAt)) continue;
    out.push({ path, key: keyOf(path, entry), entry });
  }
  o.onListed?.(dir);
  out.sort((a, b) => compareKeys(a.key, b.key));
  for (let i = 1; i < out.length; i++) {
    if (out[i - 1]!.key === out[i]!.key) throw new CopyJobError(`the store listed ${JSON.stringify(out[i]!.path)} twice`);
  }
  return out;
}

async function* passKeyOrder(o: OrderedListingOptions, root: string): AsyncGenerator<ListedEntry> {
  const prefix = root === '' ? '' : `${root}/`;
  let previous: string | null = null;
  // The directories of the last key and whether the filter takes them (consecutive keys share most).
  let checkedDir = '';
  let dirIncluded = true;
  for await (const entry of o.connector.list(root, { recursive: true, signal: o.signal })) {
    if (!entry.path.startsWith(prefix) || entry.path.length === prefix.length) {
      throw new CopyJobError(`the store listed ${JSON.stringify(entry.path)}, which is not below ${o.root}`);
    }
    const path = entry.path.slice(prefix.length);
    const key = keyOf(path, entry);
    if (previous !== null && compareKeys(previous, key) >= 0) {
      throw new CopyJobError(`the store listed ${JSON.stringify(key)} after ${JSON.stringify(previous)}: its listing is not in key order, so it cannot be compared`);
    }
    previous = key;
    const dir = parentOf(path);
    if (dir !== checkedDir) {
      checkedDir = dir;
      dirIncluded = ancestorsIncluded(o.filter, dir);
    }
    if (!dirIncluded) continue;
    if (entry.kind === 'directory' ? !o.filter.includeDirectory(path) : !o.filter.includeFile(path, entry.size, entry.modifiedAt)) continue;
    yield { path, key, entry };
  }
  o.onListed?.(root);
}

/** Every directory from the top down to `dir` is included (an excluded one prunes all below it). */
function ancestorsIncluded(filter: FileFilter, dir: string): boolean {
  if (!filter.prunes || dir === '') return true;
  let at = dir.indexOf('/');
  while (at >= 0) {
    if (!filter.includeDirectory(dir.slice(0, at))) return false;
    at = dir.indexOf('/', at + 1);
  }
  return filter.includeDirectory(dir);
}

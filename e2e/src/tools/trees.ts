import { createHash, randomBytes, randomFillSync } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { createReadStream, createWriteStream, mkdirSync, readdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, ListMultipartUploadsCommand, ListObjectsV2Command, PutObjectCommand, S3Client,
} from '@aws-sdk/client-s3';

/**
 * Trees of files for the e2e tests and the benchmarks: written on a local directory (the sftp,
 * smb and nfs test servers serve local directories) or in a bucket of the test S3 server, changed
 * (N files rewritten, N deleted, N added), and compared byte for byte. Content is hashed as it
 * streams: no file is ever held whole in memory to compare it.
 */

/** Relative path → SHA-256 hex of every file of a tree. */
export type Digests = Map<string, string>;

export function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

export async function sha256Stream(stream: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Streams `bytes` random bytes to `path`, returning their SHA-256. */
export async function writeRandomFile(path: string, bytes: number): Promise<string> {
  mkdirSync(join(path, '..'), { recursive: true });
  const hash = createHash('sha256');
  const out = createWriteStream(path);
  const chunk = Buffer.alloc(4 * 1024 * 1024);
  for (let left = bytes; left > 0;) {
    const n = Math.min(chunk.length, left);
    randomFillSync(chunk, 0, n);
    const piece = Buffer.from(chunk.subarray(0, n));
    hash.update(piece);
    left -= n;
    if (!out.write(piece)) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  return hash.digest('hex');
}

/**
 * Writes the acceptance tree of the connector ring: `count` files in nested directories (some
 * three deep), unicode names, an empty file, an empty directory, and one big file of `bigBytes`
 * random bytes. Returns the digests of the files it wrote.
 */
export async function writeTree(root: string, opts: { count: number; bigBytes: number }): Promise<Digests> {
  const digests: Digests = new Map();
  mkdirSync(join(root, 'empty-dir'), { recursive: true });
  const put = (rel: string, data: Buffer) => {
    mkdirSync(join(root, rel, '..'), { recursive: true });
    writeFileSync(join(root, rel), data);
    digests.set(rel, sha256(data));
  };
  put('empty.txt', Buffer.alloc(0));
  let written = 1;
  for (let i = 0; written < opts.count - 1; i++, written++) {
    const dir = i % 4 === 0 ? '' : i % 4 === 1 ? `${NAMES[i % NAMES.length]}/` : i % 4 === 2 ? `a/b${i % 7}/` : `a/b${i % 7}/c ${NAMES[i % NAMES.length]}/`;
    put(`${dir}${NAMES[i % NAMES.length]}-${i}.bin`, randomBytes(1 + ((i * 7919) % 40_000)));
  }
  digests.set('big/big.bin', await writeRandomFile(join(root, 'big', 'big.bin'), opts.bigBytes));
  return digests;
}

/** Name stems: plain, accented, CJK, emoji, with a space. */
const NAMES = ['plain', 'ünïcödé', '日本語', 'emoji-🚀', 'space name'];

/** Digests of every file below `root` on the local filesystem, and its directories. */
export async function digestDir(root: string): Promise<{ files: Digests; dirs: string[] }> {
  const files: Digests = new Map();
  const dirs: string[] = [];
  const walk = async (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = join(dir, entry.name);
      if (entry.isDirectory()) {
        dirs.push(relative(root, full));
        await walk(full);
      } else files.set(relative(root, full), await sha256Stream(createReadStream(full)));
    }
  };
  if (statSync(root, { throwIfNoEntry: false })) await walk(root);
  return { files, dirs };
}

export function s3Client(env: NodeJS.ProcessEnv): S3Client {
  return new S3Client({
    endpoint: env.XFER_TEST_S3_ENDPOINT, region: 'us-east-1', forcePathStyle: true,
    credentials: { accessKeyId: env.XFER_TEST_S3_ACCESS_KEY!, secretAccessKey: env.XFER_TEST_S3_SECRET_KEY! },
  });
}

/** Every object under `prefix/` (key relative to it), page by page. */
async function* listObjects(s3: S3Client, bucket: string, prefix: string) {
  let token: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}/`, ContinuationToken: token }));
    for (const object of page.Contents ?? []) yield { rel: object.Key!.slice(prefix.length + 1), object };
    token = page.NextContinuationToken;
  } while (token);
}

/** Digests of every object under `prefix/` (keys relative to it; `dir/` markers listed apart). */
export async function digestBucket(s3: S3Client, bucket: string, prefix: string): Promise<{ files: Digests; markers: string[] }> {
  const files: Digests = new Map();
  const markers: string[] = [];
  for await (const { rel, object } of listObjects(s3, bucket, prefix)) {
    // The destination directory's own marker (`prefix/`).
    if (rel === '') continue;
    if (rel.endsWith('/')) {
      markers.push(rel.slice(0, -1));
      continue;
    }
    const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: object.Key! }));
    files.set(rel, await sha256Stream(got.Body as Readable));
  }
  return { files, markers };
}

/** Multipart uploads still open in the bucket: a clean cancel leaves none. */
export async function openUploads(s3: S3Client, bucket: string): Promise<number> {
  const res = await s3.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
  return res.Uploads?.length ?? 0;
}

/** Files of `actual` that differ from, are missing from, or are extra to `expected`. */
export function treeDiff(expected: Digests, actual: Digests): string[] {
  const problems: string[] = [];
  for (const [path, digest] of expected) {
    const got = actual.get(path);
    if (got === undefined) problems.push(`missing ${path}`);
    else if (got !== digest) problems.push(`differs ${path}`);
  }
  for (const path of actual.keys()) if (!expected.has(path)) problems.push(`extra ${path}`);
  return problems;
}

/**
 * One place a tree lives: a local directory or a prefix of a bucket. `stamps()` gives, per file,
 * what any write of it changes even when the bytes are the same (a local file's inode and ctime;
 * an object's ETag and last-modified time), so a test can tell that a run wrote nothing else.
 */
export interface TreePlace {
  readonly label: string;
  write(rel: string, data: Buffer, mtime?: Date): Promise<void>;
  remove(rel: string): Promise<void>;
  digests(): Promise<Digests>;
  stamps(): Promise<Map<string, string>>;
  /** How coarse a stamp's time is: a write within the same span may leave the stamp as it was. */
  readonly stampResolutionMs: number;
  /** Each file's modification time (ms since the epoch): a local file's, an object's kept `mtime` (else its last-modified time). */
  mtimes(): Promise<Map<string, number>>;
}

/**
 * A tree in a local directory. `owner` (a login of a test server) is given what is written, so
 * that server's user may read, change and delete it; `mtime`, when given, is set on the file
 * (a size-and-mtime comparison then sees a change whatever the clock's resolution on the server).
 */
export function localPlace(root: string, owner?: string): TreePlace {
  const chown = (path: string) => {
    if (!owner) return;
    const res = spawnSync('chown', [`${owner}:`, path]);
    if (res.status !== 0) throw new Error(`chown ${owner} ${path}: ${res.stderr}`);
  };
  return {
    label: root,
    stampResolutionMs: 0,
    async write(rel, data, mtime) {
      const full = join(root, rel);
      // Each directory made is handed to the owner too: the server's user deletes in it.
      const missing: string[] = [];
      for (let dir = dirname(full); dir.startsWith(root) && !statSync(dir, { throwIfNoEntry: false }); dir = dirname(dir)) missing.unshift(dir);
      mkdirSync(dirname(full), { recursive: true });
      for (const dir of missing) chown(dir);
      writeFileSync(full, data);
      if (mtime) utimesSync(full, mtime, mtime);
      chown(full);
    },
    async remove(rel) {
      rmSync(join(root, rel));
    },
    async digests() {
      return (await digestDir(root)).files;
    },
    async mtimes() {
      const mtimes = new Map<string, number>();
      const walk = (dir: string) => {
        for (const entry of readdirSync(dir, { withFileTypes: true })) {
          const full = join(dir, entry.name);
          if (entry.isDirectory()) walk(full);
          else mtimes.set(relative(root, full), statSync(full).mtimeMs);
        }
      };
      if (statSync(root, { throwIfNoEntry: false })) walk(root);
      return mtimes;
    },
    async stamps() {
      const stamps = new Map<string, string>();
      const walk = (dir: string) => {
        for (const entry of readdirSync(dir, { withFileTypes: true })) {
          const full = join(dir, entry.name);
          if (entry.isDirectory()) walk(full);
          else {
            const st = statSync(full, { bigint: true });
            stamps.set(relative(root, full), `${st.ino}:${st.ctimeNs}`);
          }
        }
      };
      if (statSync(root, { throwIfNoEntry: false })) walk(root);
      return stamps;
    },
  };
}

/** What writes and deletes a server's files through the server itself (a connector, say). */
export interface TreeWriter {
  write(rel: string, data: Buffer, mtime?: Date): Promise<void>;
  remove(rel: string): Promise<void>;
}

/**
 * A tree a server serves from the local directory `root` but caches: nfs-ganesha keeps
 * attributes and directory entries it has seen, so a file changed or deleted on disk behind its
 * back is not seen by its clients for a minute. Changes go through the server (`writer`); what is
 * on disk is the truth to compare, so digests and stamps are read there.
 */
export function servedPlace(root: string, writer: TreeWriter): TreePlace {
  const disk = localPlace(root);
  return { ...disk, label: `${root} (through its server)`, write: (rel, data, mtime) => writer.write(rel, data, mtime), remove: (rel) => writer.remove(rel) };
}

/**
 * A tree under `prefix/` of a bucket. An object's `mtime` is stored as rclone stores it (user
 * metadata `mtime`, seconds since the epoch), so both tools read it as the file's time.
 */
export function s3Place(s3: S3Client, bucket: string, prefix: string): TreePlace {
  return {
    label: `s3://${bucket}/${prefix}`,
    // Last-modified times are whole seconds (and the same bytes give the same ETag).
    stampResolutionMs: 1000,
    async write(rel, data, mtime) {
      await s3.send(new PutObjectCommand({
        Bucket: bucket, Key: `${prefix}/${rel}`, Body: data,
        Metadata: mtime ? { mtime: (mtime.getTime() / 1000).toFixed(3) } : undefined,
      }));
    },
    async remove(rel) {
      await s3.send(new DeleteObjectCommand({ Bucket: bucket, Key: `${prefix}/${rel}` }));
    },
    async digests() {
      return (await digestBucket(s3, bucket, prefix)).files;
    },
    async mtimes() {
      const mtimes = new Map<string, number>();
      for await (const { rel, object } of listObjects(s3, bucket, prefix)) {
        if (rel === '' || rel.endsWith('/')) continue;
        const head = await s3.send(new HeadObjectCommand({ Bucket: bucket, Key: object.Key! }));
        const kept = Number(head.Metadata?.mtime);
        mtimes.set(rel, Number.isFinite(kept) && head.Metadata?.mtime ? kept * 1000 : head.LastModified!.getTime());
      }
      return mtimes;
    },
    async stamps() {
      const stamps = new Map<string, string>();
      for await (const { rel, object } of listObjects(s3, bucket, prefix)) {
        if (rel === '' || rel.endsWith('/')) continue;
        stamps.set(rel, `${object.ETag}:${object.LastModified?.toISOString()}`);
      }
      return stamps;
    },
  };
}

/** The content of the `i`th file of a generated tree, `version` 0 when first written: its size differs with each version. */
function content(i: number, version: number): Buffer {
  const sizes = [0, 1, 17, 1000, 4096, 33_333, 65_536, 200_000];
  return randomBytes(sizes[i % sizes.length]! + version * 7);
}

/** Where the `i`th file of a generated tree lives: at the top, one, two and three directories deep, with unicode and spaces. */
export function treePath(i: number, tag = 'f'): string {
  const name = `${NAMES[i % NAMES.length]}-${tag}${i}.bin`;
  switch (i % 5) {
    case 0: return name;
    case 1: return `${NAMES[(i >> 1) % NAMES.length]}/${name}`;
    case 2: return `a/b${i % 3}/${name}`;
    case 3: return `a/b${i % 3}/c ${NAMES[i % NAMES.length]}/${name}`;
    default: return `deep/x/y/z/${name}`;
  }
}

/**
 * Writes `count` files of varied sizes (0 B to 200 kB) in nested directories into `place`, each
 * with an mtime an hour ago (so a change made later is always newer). Returns the paths written.
 */
export async function generateTree(place: TreePlace, count: number): Promise<string[]> {
  const paths: string[] = [];
  const then = new Date(Math.floor(Date.now() / 1000) * 1000 - 3_600_000);
  for (let i = 0; i < count; i++) {
    const rel = treePath(i);
    await place.write(rel, content(i, 0), then);
    paths.push(rel);
  }
  return paths;
}

/** What `changeTree` did, by path. */
export interface TreeChanges { changed: string[]; deleted: string[]; added: string[] }

/**
 * Rewrites `n` files of `paths` (new bytes, another size, an mtime a minute ago), deletes `n`
 * others and adds `n` new ones, spread over the tree. `paths` must hold at least `2n` files.
 */
export async function changeTree(place: TreePlace, paths: string[], n: number): Promise<TreeChanges> {
  if (paths.length < 2 * n) throw new Error(`changeTree: ${paths.length} files cannot give ${n} changed and ${n} deleted`);
  const step = Math.floor(paths.length / (2 * n));
  const picked = Array.from({ length: 2 * n }, (_, k) => paths[k * step]!);
  const changes: TreeChanges = { changed: picked.filter((_, k) => k % 2 === 0), deleted: picked.filter((_, k) => k % 2 === 1), added: [] };
  const recent = new Date(Math.floor(Date.now() / 1000) * 1000 - 60_000);
  for (const rel of changes.changed) await place.write(rel, content(paths.indexOf(rel), 1), recent);
  for (const rel of changes.deleted) await place.remove(rel);
  for (let i = 0; i < n; i++) {
    const rel = treePath(i, 'new');
    await place.write(rel, content(i, 2), recent);
    changes.added.push(rel);
  }
  return changes;
}

import { createHash, randomBytes, randomFillSync } from 'node:crypto';
import { createReadStream, createWriteStream, mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { GetObjectCommand, ListObjectsV2Command, ListMultipartUploadsCommand, S3Client } from '@aws-sdk/client-s3';
import type { Readable } from 'node:stream';

/** Relative path → SHA-256 hex of every file of a tree. */
export type Digests = Map<string, string>;

/**
 * Writes the acceptance tree: `count` files in nested directories (some three deep), unicode
 * names, an empty file, an empty directory, and one big file of `bigBytes` random bytes.
 * Returns the digests of the files it wrote.
 */
export async function writeTree(root: string, opts: { count: number; bigBytes: number }): Promise<Digests> {
  const digests: Digests = new Map();
  const names = ['plain', 'ünïcödé', '日本語', 'emoji-🚀', 'space name'];
  mkdirSync(join(root, 'empty-dir'), { recursive: true });
  const put = (rel: string, data: Buffer) => {
    mkdirSync(join(root, rel, '..'), { recursive: true });
    writeFileSync(join(root, rel), data);
    digests.set(rel, sha256(data));
  };
  put('empty.txt', Buffer.alloc(0));
  let written = 1;
  for (let i = 0; written < opts.count - 1; i++, written++) {
    const dir = i % 4 === 0 ? '' : i % 4 === 1 ? `${names[i % names.length]}/` : i % 4 === 2 ? `a/b${i % 7}/` : `a/b${i % 7}/c ${names[i % names.length]}/`;
    put(`${dir}${names[i % names.length]}-${i}.bin`, randomBytes(1 + ((i * 7919) % 40_000)));
  }
  digests.set('big/big.bin', await writeRandomFile(join(root, 'big', 'big.bin'), opts.bigBytes));
  return digests;
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

export function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

export async function sha256Stream(stream: Readable): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

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

/** Digests of every object under `prefix/` (keys relative to it; `dir/` markers listed apart). */
export async function digestBucket(s3: S3Client, bucket: string, prefix: string): Promise<{ files: Digests; markers: string[] }> {
  const files: Digests = new Map();
  const markers: string[] = [];
  let token: string | undefined;
  do {
    const page = await s3.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `${prefix}/`, ContinuationToken: token }));
    for (const object of page.Contents ?? []) {
      const key = object.Key!.slice(prefix.length + 1);
      // The destination directory's own marker (`prefix/`).
      if (key === '') continue;
      if (key.endsWith('/')) {
        markers.push(key.slice(0, -1));
        continue;
      }
      const got = await s3.send(new GetObjectCommand({ Bucket: bucket, Key: object.Key! }));
      files.set(key, await sha256Stream(got.Body as Readable));
    }
    token = page.NextContinuationToken;
  } while (token);
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

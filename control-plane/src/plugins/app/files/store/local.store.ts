import { constants } from 'node:fs';
import { lstat, mkdir, open, readdir, rename, rm, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { chunksOf, guardWrite, newObjectId, PendingContent, storageUnavailable } from './common.js';
import { StoredObjectMissingError, type FileStore, type PendingObject } from './types.js';

/** Bytes gathered before one writev: fewer system calls than one write per (often 64 KiB) chunk. */
const WRITE_BATCH_BYTES = 1024 * 1024;
/** A key: the two-hex-digit fan-out directory, then the object id that starts with those digits. */
const KEY = /^([0-9a-f]{2})\/(\1[0-9a-f]{30})$/;
/** A temp file's name: an object id. */
const TEMP_NAME = /^[0-9a-f]{32}$/;

/**
 * Files in a local directory: `tmp/<id>` while written and pending (created exclusively, 0600,
 * fsync'd before `write` resolves), `objects/<first two digits of id>/<id>` once committed (a
 * rename in the same file system, then an fsync of the directory so the new name survives a
 * crash). The key is `<fan-out>/<id>`; any other key is refused before a path is built from it,
 * so no key, whatever it says, names a file outside `objects/`. 256 fan-out directories keep each
 * one to a few thousand entries at a million files.
 */
export class LocalFileStore implements FileStore {
  readonly kind = 'local' as const;
  readonly tmpDir: string;
  readonly objectsDir: string;
  /** Fan-out directories known to exist, so a commit need not mkdir every time. */
  private readonly fanOuts = new Set<string>();

  constructor(readonly dir: string) {
    this.tmpDir = join(dir, 'tmp');
    this.objectsDir = join(dir, 'objects');
  }

  /** Creates the directories (0700: the content is the accounts' files). Throws when it cannot. */
  async start(): Promise<void> {
    for (const dir of [this.dir, this.tmpDir, this.objectsDir]) await mkdir(dir, { recursive: true, mode: 0o700 });
  }

  async write(body: Readable, signal?: AbortSignal): Promise<PendingObject> {
    const id = newObjectId();
    const tempPath = join(this.tmpDir, id);
    let file: FileHandle | null = null;
    return guardWrite(body, signal, async () => {
      file = await local(() => open(tempPath, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600));
      let size = 0;
      let batch: Buffer[] = [];
      let batched = 0;
      for await (const chunk of chunksOf(body)) {
        batch.push(chunk);
        batched += chunk.length;
        if (batched < WRITE_BATCH_BYTES) continue;
        await local(() => writeAll(file!, batch, batched));
        size += batched;
        batch = [];
        batched = 0;
      }
      if (batched > 0) await local(() => writeAll(file!, batch, batched));
      size += batched;
      await local(() => file!.sync());
      const closing = file;
      file = null;
      await local(() => closing.close());
      return new LocalPending(this, id, size);
    }, async () => {
      await (file as FileHandle | null)?.close().catch(() => undefined);
      await rm(tempPath, { force: true });
    });
  }

  async read(key: string, range?: { start: number; end: number }): Promise<Readable> {
    const path = this.pathOf(key);
    if (!path) throw new StoredObjectMissingError(key);
    let file: FileHandle;
    try {
      // O_NOFOLLOW: the store never makes symlinks, so one in its place is not its content.
      file = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (err) {
      if (isErrno(err, 'ENOENT', 'ENOTDIR', 'ELOOP')) throw new StoredObjectMissingError(key);
      throw localError(err);
    }
    return file.createReadStream({ start: range?.start, end: range?.end, highWaterMark: 256 * 1024 });
  }

  async remove(key: string): Promise<void> {
    const path = this.pathOf(key);
    if (!path) return;
    await unlink(path).catch((err: unknown) => {
      if (!isErrno(err, 'ENOENT', 'ENOTDIR')) throw localError(err);
    });
  }

  async sweep(olderThanMs: number): Promise<number> {
    const cutoff = Date.now() - olderThanMs;
    const names = await local(() => readdir(this.tmpDir));
    let removed = 0;
    for (const name of names) {
      if (!TEMP_NAME.test(name)) continue;
      const path = join(this.tmpDir, name);
      const stat = await lstat(path).catch(() => null);
      if (!stat?.isFile() || stat.mtimeMs >= cutoff) continue;
      if (await unlink(path).then(() => true, () => false)) removed++;
    }
    return removed;
  }

  async close(): Promise<void> {}

  /** Renames a temp file into objects/ and makes the new name durable; returns the key. */
  async commitTemp(id: string): Promise<string> {
    const fanOut = id.slice(0, 2);
    const dir = join(this.objectsDir, fanOut);
    if (!this.fanOuts.has(fanOut)) {
      await local(() => mkdir(dir, { recursive: true, mode: 0o700 }));
      this.fanOuts.add(fanOut);
    }
    await local(() => rename(join(this.tmpDir, id), join(dir, id)), 'the temporary content is gone (swept after a day?)');
    await local(() => fsyncDirectory(dir));
    return `${fanOut}/${id}`;
  }

  /** Removes a temp file, and its committed name when a commit may have got that far. */
  async removeTemp(id: string, committedToo: boolean): Promise<void> {
    await rm(join(this.tmpDir, id), { force: true });
    if (committedToo) await rm(join(this.objectsDir, id.slice(0, 2), id), { force: true });
  }

  /** The file of a key, or null when the key is not one this store makes. */
  private pathOf(key: string): string | null {
    const match = typeof key === 'string' ? KEY.exec(key) : null;
    return match ? join(this.objectsDir, match[1]!, match[2]!) : null;
  }
}

class LocalPending extends PendingContent {
  constructor(private readonly store: LocalFileStore, private readonly id: string, size: number) {
    super(size);
  }

  protected persist(): Promise<string> {
    return this.store.commitTemp(this.id);
  }

  protected removeTemporary(commitAttempted: boolean): Promise<void> {
    return this.store.removeTemp(this.id, commitAttempted);
  }
}

/** Writes every byte of `chunks` (writev may write fewer than asked). */
async function writeAll(file: FileHandle, chunks: Buffer[], length: number): Promise<void> {
  let rest = chunks;
  let left = length;
  while (left > 0) {
    const { bytesWritten } = await file.writev(rest);
    left -= bytesWritten;
    if (left > 0) rest = skip(rest, bytesWritten);
  }
}

function skip(chunks: Buffer[], bytes: number): Buffer[] {
  let n = bytes;
  let i = 0;
  while (n >= chunks[i]!.length) n -= chunks[i++]!.length;
  return [chunks[i]!.subarray(n), ...chunks.slice(i + 1)];
}

/** fsync of a directory: makes a rename into it survive a crash. */
async function fsyncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Runs a file-system call, its errors as ServiceUnavailableError (`whenMissing` for ENOENT). */
async function local<T>(fn: () => Promise<T>, whenMissing?: string): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (whenMissing && isErrno(err, 'ENOENT')) throw storageUnavailable(whenMissing, err);
    throw localError(err);
  }
}

/**
 * The reason of a file-system error without the path in it (the message reaches API clients):
 * "ENOSPC: no space left on device, write" → "no space left on device (ENOSPC)".
 */
function localError(err: unknown) {
  const e = err as NodeJS.ErrnoException;
  const text = typeof e?.message === 'string' ? e.message.split(',')[0]!.replace(/^[A-Z]+: /, '') : String(err);
  return storageUnavailable(e?.code ? `${text} (${e.code})` : text, err);
}

function isErrno(err: unknown, ...codes: string[]): boolean {
  return codes.includes((err as NodeJS.ErrnoException)?.code ?? '');
}

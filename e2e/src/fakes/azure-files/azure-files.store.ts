import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { mkdir, readdir, rename, rm, rmdir, stat, truncate, unlink, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { FakeError } from './azure-files.errors.js';

/** The HTTP properties a file keeps (Create File and Set File Properties set them; absent ones are cleared). */
export interface FileProperties {
  contentMd5?: string;
  contentType?: string;
  contentEncoding?: string;
  contentLanguage?: string;
  contentDisposition?: string;
  cacheControl?: string;
}

/** What the fake knows of a file or directory beyond its bytes: ids and HTTP properties. */
interface Meta {
  fileId: string;
  properties: FileProperties;
}

export type Kind = 'file' | 'directory';

export interface Node {
  kind: Kind;
  size: number;
  mtime: Date;
  birthtime: Date;
  etag: string;
  fileId: string;
  properties: FileProperties;
}

/**
 * The fake's storage: each share a directory under `<root>/shares`, its directories and files real
 * ones (bodies on disk, streamed, sparse where never written), the properties Azure keeps beside a
 * file in memory, keyed by path (lost when the fake stops, as its shares are not).
 */
export class FakeStore {
  readonly sharesDir: string;
  readonly spoolDir: string;
  private readonly meta = new Map<string, Meta>();

  constructor(root: string) {
    this.sharesDir = join(root, 'shares');
    this.spoolDir = join(root, 'spool');
    mkdirSync(this.sharesDir, { recursive: true });
    mkdirSync(this.spoolDir, { recursive: true });
  }

  /** Disk path of a share's directory. */
  sharePath(share: string): string {
    return join(this.sharesDir, share);
  }

  /** Disk path of `parts` in `share` (names were checked by the router). */
  path(share: string, parts: readonly string[]): string {
    return join(this.sharePath(share), ...parts);
  }

  async shareExists(share: string): Promise<boolean> {
    return (await this.node(this.sharePath(share)))?.kind === 'directory';
  }

  async createShare(share: string): Promise<void> {
    try {
      await mkdir(this.sharePath(share));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new FakeError(409, 'ShareAlreadyExists', 'The specified share already exists.');
      throw err;
    }
  }

  async deleteShare(share: string): Promise<void> {
    if (!(await this.shareExists(share))) throw new FakeError(404, 'ShareNotFound', 'The specified share does not exist.');
    const prefix = this.sharePath(share);
    for (const key of [...this.meta.keys()]) if (key === prefix || key.startsWith(`${prefix}/`)) this.meta.delete(key);
    await rm(prefix, { recursive: true, force: true });
  }

  /** The file or directory at a disk path, or null. */
  async node(path: string): Promise<Node | null> {
    let st;
    try {
      st = await stat(path, { bigint: true });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return null;
      throw err;
    }
    const meta = this.metaOf(path);
    return {
      kind: st.isDirectory() ? 'directory' : 'file',
      size: st.isDirectory() ? 0 : Number(st.size),
      mtime: new Date(Number(st.mtimeNs / 1_000_000n)),
      birthtime: new Date(Number((st.birthtimeNs || st.ctimeNs) / 1_000_000n)),
      // Changes with every write or resize, as the service's ETag does.
      etag: `"0x${(st.mtimeNs ^ (st.size << 20n)).toString(16).toUpperCase()}"`,
      fileId: meta.fileId,
      properties: meta.properties,
    };
  }

  /**
   * Checks that the parent of `parts` is an existing directory of an existing share: ShareNotFound,
   * then ParentNotFound, as the service answers for an operation below a missing parent.
   */
  async requireParent(share: string, parts: readonly string[]): Promise<void> {
    if (!(await this.shareExists(share))) throw new FakeError(404, 'ShareNotFound', 'The specified share does not exist.');
    if (parts.length <= 1) return;
    const parent = await this.node(this.path(share, parts.slice(0, -1)));
    if (parent?.kind !== 'directory') throw new FakeError(404, 'ParentNotFound', 'The specified parent path does not exist.');
  }

  async createDirectory(path: string): Promise<void> {
    try {
      await mkdir(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new FakeError(409, 'ResourceAlreadyExists', 'The specified resource already exists.');
      throw err;
    }
    this.metaOf(path);
  }

  async deleteDirectory(path: string): Promise<void> {
    try {
      await rmdir(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOTEMPTY') throw new FakeError(409, 'DirectoryNotEmpty', 'The specified directory is not empty.');
      throw err;
    }
    this.meta.delete(path);
  }

  /** Names in a directory with their kinds, in ordinal order of their UTF-16 code units. */
  async entries(path: string): Promise<{ name: string; kind: Kind }[]> {
    const dirents = await readdir(path, { withFileTypes: true });
    return dirents
      .map((d) => ({ name: d.name, kind: (d.isDirectory() ? 'directory' : 'file') as Kind }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** Create File: a new file of `size` zero bytes (replacing a file there), with `properties`. */
  async createFile(path: string, size: number, properties: FileProperties): Promise<void> {
    await writeFile(path, '');
    await truncate(path, size);
    this.meta.set(path, { fileId: newFileId(), properties });
  }

  async resize(path: string, size: number): Promise<void> {
    await truncate(path, size);
  }

  /** The file's last write time (the fake keeps it as the body's mtime on disk, which it reports as both times). */
  async setLastWriteTime(path: string, time: Date): Promise<void> {
    await utimes(path, time, time);
  }

  setProperties(path: string, properties: FileProperties): void {
    this.metaOf(path).properties = properties;
  }

  async deleteFile(path: string): Promise<void> {
    await unlink(path);
    this.meta.delete(path);
  }

  async renameFile(from: string, to: string): Promise<void> {
    await rename(from, to);
    const meta = this.metaOf(from);
    this.meta.delete(from);
    this.meta.set(to, meta);
  }

  /** A fresh name for a Put Range body spooled before it is checked. */
  spoolPath(): string {
    return join(this.spoolDir, randomBytes(8).toString('hex'));
  }

  private metaOf(path: string): Meta {
    let meta = this.meta.get(path);
    if (!meta) {
      meta = { fileId: newFileId(), properties: {} };
      this.meta.set(path, meta);
    }
    return meta;
  }
}

/** A file id as the service shows one: a decimal 64-bit number. */
function newFileId(): string {
  return BigInt(`0x${randomBytes(8).toString('hex')}`).toString();
}

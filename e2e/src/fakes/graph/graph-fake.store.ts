import { randomBytes } from 'node:crypto';
import { createReadStream, type Stats } from 'node:fs';
import { lstat, mkdir, readdir, rename, rm, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { ReferenceQuickXorHash } from './quickxorhash.reference.js';

/** A driveItem as the fake answers it (Microsoft Graph "driveItem resource type", the fields a client reads). */
export interface DriveItemJson {
  id: string;
  name: string;
  size: number;
  createdDateTime: string;
  lastModifiedDateTime: string;
  /** The client's times: the fake keeps one modification time (the file's mtime on disk) for both. */
  fileSystemInfo: { createdDateTime: string; lastModifiedDateTime: string };
  eTag: string;
  cTag: string;
  parentReference?: { driveId: string; driveType: string; id?: string; path?: string };
  file?: { mimeType: string; hashes: { quickXorHash: string } };
  folder?: { childCount: number };
  root?: Record<string, never>;
  '@microsoft.graph.downloadUrl'?: string;
}

export const DRIVE_ID = 'b!fake-graph-drive-0001';

/**
 * The fake drive's items: a directory on disk is the drive root, its files and folders the
 * items. Ids are opaque and stable across moves, as Graph's are (kept in memory, given on first
 * sight: tests write into the directory behind the fake's back). QuickXorHash is computed when a
 * file is first described and cached by inode, size and mtime.
 */
export class DriveStore {
  private readonly idsByPath = new Map<string, string>();
  private readonly pathsById = new Map<string, string>();
  private readonly hashes = new Map<string, string>();

  constructor(readonly root: string) {
    this.idsByPath.set('', 'root-item-id');
    this.pathsById.set('root-item-id', '');
  }

  /** Absolute file system path of a drive path (`a/b`, '' for the root). */
  abs(rel: string): string {
    return rel === '' ? this.root : join(this.root, ...rel.split('/'));
  }

  async stat(rel: string): Promise<Stats | null> {
    return lstat(this.abs(rel)).catch(() => null);
  }

  idOf(rel: string): string {
    let id = this.idsByPath.get(rel);
    if (!id) {
      id = `FAKE${randomBytes(10).toString('hex').toUpperCase()}`;
      this.idsByPath.set(rel, id);
      this.pathsById.set(id, rel);
    }
    return id;
  }

  pathOf(id: string): string | undefined {
    return this.pathsById.get(id);
  }

  /** PATCH fileSystemInfo.lastModifiedDateTime: the item's modification time. */
  async setModifiedAt(rel: string, time: Date): Promise<void> {
    await utimes(this.abs(rel), time, time);
  }

  /** Sorted child names of a folder (the listing order Graph keeps stable between pages). */
  async children(rel: string): Promise<string[]> {
    const names = await readdir(this.abs(rel));
    return names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /** The driveItem of `rel` (which must exist). */
  async item(rel: string, st: Stats, downloadUrl?: string): Promise<DriveItemJson> {
    const id = this.idOf(rel);
    const name = rel === '' ? 'root' : rel.slice(rel.lastIndexOf('/') + 1);
    const parent = rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : '';
    const version = Math.floor(st.mtimeMs * 1000).toString(36);
    const base: DriveItemJson = {
      id, name, size: st.isDirectory() ? 0 : st.size,
      createdDateTime: st.birthtime.toISOString(), lastModifiedDateTime: st.mtime.toISOString(),
      fileSystemInfo: { createdDateTime: st.birthtime.toISOString(), lastModifiedDateTime: st.mtime.toISOString() },
      eTag: `"{${id}},${version}"`, cTag: `"c:{${id}},${version}"`,
      parentReference: rel === ''
        ? { driveId: DRIVE_ID, driveType: 'business' }
        : { driveId: DRIVE_ID, driveType: 'business', id: this.idOf(parent), path: `/drive/root:${parent ? `/${parent}` : ''}` },
    };
    if (rel === '') base.root = {};
    if (st.isDirectory()) {
      base.folder = { childCount: (await readdir(this.abs(rel))).length };
      return base;
    }
    base.file = { mimeType: 'application/octet-stream', hashes: { quickXorHash: await this.quickXorHash(rel, st) } };
    if (downloadUrl) base['@microsoft.graph.downloadUrl'] = downloadUrl;
    return base;
  }

  private async quickXorHash(rel: string, st: Stats): Promise<string> {
    const key = hashKey(st);
    const cached = this.hashes.get(key);
    if (cached) return cached;
    const hash = new ReferenceQuickXorHash();
    for await (const chunk of createReadStream(this.abs(rel))) hash.update(chunk as Buffer);
    const digest = hash.digestBase64();
    this.hashes.set(key, digest);
    return digest;
  }

  /** Creates the folders of `rel` (and its parents) as a path-addressed upload does. False when a file is in the way. */
  async mkdirs(rel: string): Promise<boolean> {
    if (rel === '') return true;
    try {
      await mkdir(this.abs(rel), { recursive: true });
      return true;
    } catch {
      return false;
    }
  }

  /** Moves a staged upload (outside the root) to `rel`, replacing a file there: one rename, so it appears complete. */
  async moveIn(staging: string, rel: string): Promise<void> {
    await rename(staging, this.abs(rel));
  }

  /** Moves `from` to `to`, keeping the ids of the item and everything below it. */
  async move(from: string, to: string): Promise<void> {
    await rename(this.abs(from), this.abs(to));
    for (const [path, id] of [...this.idsByPath]) {
      if (path !== from && !path.startsWith(`${from}/`)) continue;
      const moved = to + path.slice(from.length);
      this.idsByPath.delete(path);
      this.idsByPath.set(moved, id);
      this.pathsById.set(id, moved);
    }
  }

  async remove(rel: string): Promise<void> {
    await rm(this.abs(rel), { recursive: true, force: true });
    for (const [path, id] of [...this.idsByPath]) {
      if (path === rel || path.startsWith(`${rel}/`)) {
        this.idsByPath.delete(path);
        this.pathsById.delete(id);
      }
    }
  }
}

function hashKey(st: Stats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
}

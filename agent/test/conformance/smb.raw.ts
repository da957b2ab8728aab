import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chown, mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RawStore } from './conformance.suite.js';

/**
 * The smb test server's share through its backing directory on this machine (node:fs, not SMB):
 * what a conformance spec checks lands where it says. Files and directories it creates are given
 * to the share's owner, the account smbd works as, so the connector may replace and delete them.
 */
export class RawSmbShare implements RawStore {
  private constructor(
    private readonly dir: string,
    private readonly owner: { uid: number; gid: number },
  ) {}

  /** The directory `rel` below the share's root `root`, created (owned like the root). */
  static async open(root: string, rel: string): Promise<RawSmbShare> {
    const { uid, gid } = await stat(root);
    const raw = new RawSmbShare(join(root, rel), { uid, gid });
    await raw.mkdirs('');
    return raw;
  }

  async list(rel: string): Promise<string[]> {
    const out: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      const items = await readdir(join(this.dir, dir), { withFileTypes: true }).catch(() => []);
      for (const item of items) {
        const child = dir ? `${dir}/${item.name}` : item.name;
        out.push(child);
        if (item.isDirectory()) await walk(child);
      }
    };
    await walk(rel);
    return out.sort();
  }

  async put(rel: string, data: Buffer): Promise<void> {
    await this.mkdirs(rel.split('/').slice(0, -1).join('/'));
    await writeFile(join(this.dir, rel), data);
    await chown(join(this.dir, rel), this.owner.uid, this.owner.gid);
  }

  async sha256(rel: string): Promise<string | null> {
    const hash = createHash('sha256');
    try {
      for await (const chunk of createReadStream(join(this.dir, rel))) hash.update(chunk as Buffer);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    return hash.digest('hex');
  }

  /** mkdir -p of `rel` below the directory, itself included, each level owned by the share's owner. */
  async mkdirs(rel: string): Promise<void> {
    let path = this.dir;
    await mkdir(path, { recursive: true });
    await chown(path, this.owner.uid, this.owner.gid);
    for (const segment of rel.split('/').filter(Boolean)) {
      path = join(path, segment);
      await mkdir(path).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw err;
      });
      await chown(path, this.owner.uid, this.owner.gid);
    }
  }

  /** Removes the directory and everything in it. */
  destroy(): Promise<void> {
    return rm(this.dir, { recursive: true, force: true });
  }
}

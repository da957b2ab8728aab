import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { RawStore } from './conformance.suite.js';

/** The host directory through node:fs directly. */
export class RawFs implements RawStore {
  constructor(private readonly root: string) {}

  async list(rel: string): Promise<string[]> {
    const out: string[] = [];
    const walk = async (dir: string): Promise<void> => {
      const items = await readdir(join(this.root, dir), { withFileTypes: true }).catch(() => []);
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
    await mkdir(dirname(join(this.root, rel)), { recursive: true });
    await writeFile(join(this.root, rel), data);
  }

  async sha256(rel: string): Promise<string | null> {
    const hash = createHash('sha256');
    try {
      for await (const chunk of createReadStream(join(this.root, rel))) hash.update(chunk as Buffer);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    return hash.digest('hex');
  }
}

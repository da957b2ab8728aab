import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { RawStore } from './conformance.suite.js';

/**
 * The Graph fake's drive seen on disk (XFER_TEST_ONEDRIVE_ROOT), not through Graph: the fake
 * stores a drive path `a/b` as the file `<root>/a/b`, so what the connector wrote is checked
 * where it landed, and what a spec puts there appears to the connector as any file does.
 */
export class RawOnedrive implements RawStore {
  constructor(private readonly dir: string) {}

  async list(rel: string): Promise<string[]> {
    const out: string[] = [];
    const walk = async (sub: string): Promise<void> => {
      const names = await readdir(join(this.dir, sub)).catch(() => [] as string[]);
      for (const name of names) {
        const child = sub ? `${sub}/${name}` : name;
        out.push(child);
        if ((await stat(join(this.dir, child))).isDirectory()) await walk(child);
      }
    };
    await walk(rel);
    return out.sort();
  }

  async put(rel: string, data: Buffer): Promise<void> {
    await mkdir(dirname(join(this.dir, rel)), { recursive: true });
    await writeFile(join(this.dir, rel), data);
  }

  async sha256(rel: string): Promise<string | null> {
    const path = join(this.dir, rel);
    if (!(await stat(path).then((s) => s.isFile(), () => false))) return null;
    const hash = createHash('sha256');
    for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
    return hash.digest('hex');
  }

  async mkdirs(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
  }

  async destroy(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

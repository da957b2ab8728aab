import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { FsConnector } from '../../src/connectors/fs/fs.connector.js';
import { runConformance, type ConformanceTarget, type RawStore } from './conformance.suite.js';

/** The host directory through node:fs directly. */
class RawFs implements RawStore {
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

runConformance('fs (host directory)', async (): Promise<ConformanceTarget> => {
  const base = await mkdtemp(join(tmpdir(), 'xfer-conformance-fs-'));
  const root = join(base, 'root');
  await mkdir(root);
  return {
    connector: () => new FsConnector({ root, fsync: false }),
    raw: new RawFs(root),
    failures: [
      { name: 'missing base directory', connector: () => new FsConnector({ root: join(base, 'missing') }), code: 'NOT_FOUND', message: /does not exist/ },
    ],
    // Tests run as root, which no file mode stops: no read-only case here.
    listPastOnePage: true,
    cleanup: () => rm(base, { recursive: true, force: true }),
  };
});

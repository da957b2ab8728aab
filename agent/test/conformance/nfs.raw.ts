import { mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { RawFs } from './fs.raw.js';

/**
 * A directory of the test server's export read on the server's own disk (XFER_TEST_NFS_ROOT),
 * not through NFS: what the connector wrote is checked where ganesha stored it, with the owner
 * the server gave it.
 */
export class RawNfsExport extends RawFs {
  constructor(readonly dir: string) {
    super(dir);
  }

  static async create(root: string, name: string, mode = 0o755): Promise<RawNfsExport> {
    const dir = join(root, name);
    await mkdir(dir, { mode });
    return new RawNfsExport(dir);
  }

  /** `uid:gid` of the stored file. */
  async owner(rel: string): Promise<string> {
    const info = await stat(join(this.dir, rel));
    return `${info.uid}:${info.gid}`;
  }

  destroy(): Promise<void> {
    return rm(this.dir, { recursive: true, force: true });
  }
}

import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { AgentAccess } from '../access.js';
import { FsConnector } from '../fs/fs.connector.js';
import { fsError } from '../fs/fs-errors.js';
import { ConnectorError } from '../types.js';

/**
 * Mounted mode: the export is mounted on the agent host (by the OS, as production agents
 * usually reach NFS) at `mountPath`, and the connection's `path` is a directory below that mount
 * point. Everything is the fs connector on that directory; only `test()` says more, because a
 * mount point that is missing, unreadable or not mounted is the usual fault here, and an
 * unmounted mount point is an empty local directory that would quietly fill the host's own disk.
 */
export class MountedNfsConnector extends FsConnector {
  constructor(
    private readonly mountPath: string,
    path: string,
    access?: AgentAccess,
  ) {
    super({ root: join(mountPath, path), type: 'nfs', access });
  }

  override async test(options?: { signal?: AbortSignal }): Promise<string> {
    // Before anything of the mount point is looked at.
    await this.allowed();
    let mounted: boolean;
    try {
      const info = await stat(this.mountPath);
      if (!info.isDirectory()) throw new ConnectorError('CONFLICT', `mount path ${this.mountPath} is not a directory`);
      await access(this.mountPath, constants.R_OK | constants.X_OK);
      // A mount point lies on another device than its parent directory.
      mounted = info.dev !== (await stat(dirname(this.mountPath))).dev;
    } catch (err) {
      const mapped = fsError(err, '');
      const words = mapped.code === 'NOT_FOUND' ? 'does not exist on the agent host (is the export mounted there?)' : mapped.message.replace(/^\/: /, '');
      throw new ConnectorError(mapped.code, `mount path ${this.mountPath}: ${words}`, { cause: err });
    }
    const base = await super.test(options);
    const note = mounted ? `an export is mounted at ${this.mountPath}` : `note: ${this.mountPath} is not a mount point, so files go to the agent host's own disk unless the export is mounted there`;
    return `${base}; ${note}`;
  }
}

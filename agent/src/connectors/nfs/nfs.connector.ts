import { guardWrite } from '@xfer/storage';
import type { Readable } from 'node:stream';
import type { ConnectionSettings } from '@xfer/shared';
import { baseName, joinRel, parentOf, relativePath, shownPath } from '../paths.js';
import { closedAccess, type AgentAccess } from '../access.js';
import { ConnectorError, type Connector, type ConnectorCapabilities, type ConnectorContext, type Entry, type WriteOptions, type WriteResult } from '../types.js';
import { DEFAULT_NFS_TUNING, mountPathOf, nfsEndpoint, type NfsEndpoint, type NfsTuning } from './nfs.config.js';
import { nfsError, nfsStatus } from './nfs.errors.js';
import { MountedNfsConnector } from './nfs.mounted.js';
import { nfsReadStream, writeBody } from './nfs.streams.js';
import { mountBase, MOUNT_PROGRAM, portOf } from './mount.js';
import { Nfs3, NF3DIR, NF3REG, ZERO_VERF, type Attributes, type FileHandle, type FsInfo } from './nfs3.protocol.js';
import { RpcClient } from './rpc.client.js';

const NOENT = 2;
const EXIST = 17;
const STALE = 70;
const BADHANDLE = 10001;
/** Directory handles remembered per connector (path → handle); forgotten all at once past this. */
const MAX_CACHED_DIRS = 4096;

type Signal = AbortSignal | undefined;

interface Session {
  nfs: Nfs3;
  base: FileHandle;
  exportPath: string;
  mountPort: number;
  info: FsInfo;
}

/**
 * NFSv3 (RFC 1813) from userspace, without mounting: MOUNT3 for the export's root handle, then
 * LOOKUP down to the base path, and every operation as NFS calls over one TCP connection
 * (rpc.client.ts), as the AUTH_SYS identity of credentials.uid/gid. Real directories and an
 * atomic RENAME that replaces its target: the engine writes a temporary name and renames.
 * Directory handles are cached by path; a stale one (the directory was replaced on the server)
 * drops the session, which is set up again once and the operation retried.
 */
export class NfsConnector implements Connector {
  readonly type = 'nfs' as const;
  readonly capabilities: ConnectorCapabilities = { rename: true, directories: true, modTime: 'set', modTimePrecision: 1 };
  private readonly endpoint: NfsEndpoint;
  private readonly tuning: NfsTuning;
  private session: Promise<Session> | null = null;
  private readonly dirs = new Map<string, FileHandle>();
  private closed = false;

  private readonly access: AgentAccess;

  constructor(settings: ConnectionSettings, tuning: Partial<NfsTuning> = {}, access: AgentAccess = closedAccess()) {
    this.endpoint = nfsEndpoint(settings);
    this.access = access;
    this.tuning = { ...DEFAULT_NFS_TUNING, ...tuning };
  }

  async *list(path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
    const rel = relativePath(path);
    const { signal } = options;
    const { s, dir } = await this.op('list', rel, signal, async (s) => ({ s, dir: await this.directory(s, rel, signal) }));
    yield* this.walk(s, dir, rel, options.recursive, signal);
  }

  async stat(path: string, options: { signal?: AbortSignal } = {}): Promise<Entry | null> {
    const rel = relativePath(path);
    return this.op('stat', rel, options.signal, async (s) => {
      const found = await this.find(s, rel, options.signal);
      return found && toEntry(rel, found.attrs);
    });
  }

  async read(path: string, options: { start?: number; end?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    const rel = relativePath(path);
    const { signal } = options;
    return this.op('read', rel, signal, async (s) => {
      const found = await this.find(s, rel, signal);
      if (!found) throw new ConnectorError('NOT_FOUND', `read ${shownPath(rel)}: does not exist`);
      if (found.attrs.type !== NF3REG) throw new ConnectorError('CONFLICT', `read ${shownPath(rel)}: not a file`);
      const end = Math.min(options.end ?? Infinity, found.attrs.size - 1);
      return nfsReadStream(s.nfs, found.fh, options.start ?? 0, end, {
        chunkBytes: Math.min(s.info.rtmax, this.tuning.maxIoBytes),
        depth: this.tuning.readDepth,
        signal,
        fail: (err) => this.error(err, 'read', rel, signal),
      });
    });
  }

  async write(path: string, body: Readable, options: WriteOptions = {}): Promise<WriteResult> {
    const { signal } = options;
    let rel: string;
    try {
      rel = relativePath(path);
      if (rel === '') throw new ConnectorError('CONFLICT', 'cannot write to the base directory itself');
    } catch (err) {
      body.destroy();
      throw this.error(err, 'write', '', signal);
    }
    const fail = (err: unknown) => this.error(err, 'write', rel, signal);
    let created: { dir: FileHandle; name: string } | null = null;
    // Remove what this call created (not aborted: the signal would refuse the REMOVE too).
    const cleanup = async () => {
      if (created) await this.session?.then((s) => s.nfs.remove(created!.dir, created!.name, undefined)).catch(() => undefined);
    };
    return guardWrite(body, { signal, aborted: () => fail(new ConnectorError('TRANSIENT', 'aborted', { cause: signal!.reason })), mapError: fail, cleanup }, async () => {
      const s = await this.ready(signal);
      const dir = await this.mkdirs(s, parentOf(rel), signal);
      const fh = await s.nfs.create(dir, baseName(rel), signal);
      created = { dir, name: baseName(rel) };
      const size = await writeBody(s.nfs, fh, body, { chunkBytes: Math.min(s.info.wtmax, this.tuning.maxIoBytes), depth: this.tuning.writeDepth, signal });
      // After the last WRITE and the COMMIT, so that nothing moves it again; a RENAME keeps it.
      if (options.modifiedAt) await s.nfs.setMtime(fh, options.modifiedAt, signal);
      return { size };
    });
  }

  async mkdir(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    await this.op('mkdir', rel, options.signal, (s) => this.mkdirs(s, rel, options.signal));
  }

  async remove(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('PERMISSION', 'refusing to remove the base directory itself');
    const { signal } = options;
    await this.op('remove', rel, signal, async (s) => {
      let parent: FileHandle;
      try {
        parent = await this.directory(s, parentOf(rel), signal);
      } catch (err) {
        if (err instanceof ConnectorError && err.code === 'NOT_FOUND') return;
        throw err;
      }
      const child = await s.nfs.lookup(parent, baseName(rel), signal).catch((err: unknown) => {
        if (nfsStatus(err) === NOENT) return null;
        throw err;
      });
      if (!child) return;
      this.forget(rel);
      const attrs = child.attrs ?? (await s.nfs.getattr(child.fh, signal));
      await this.removeChild(s, parent, baseName(rel), attrs.type === NF3DIR ? child.fh : null, signal);
    });
  }

  async rename(from: string, to: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const relFrom = relativePath(from);
    const relTo = relativePath(to);
    if (relFrom === '' || relTo === '') throw new ConnectorError('PERMISSION', 'cannot rename the base directory itself');
    const { signal } = options;
    await this.op('rename', relFrom, signal, async (s) => {
      const fromDir = await this.directory(s, parentOf(relFrom), signal);
      const toDir = await this.mkdirs(s, parentOf(relTo), signal);
      this.forget(relFrom);
      this.forget(relTo);
      await s.nfs.rename(fromDir, baseName(relFrom), toDir, baseName(relTo), signal);
    });
  }

  async test(options: { signal?: AbortSignal } = {}): Promise<string> {
    const { signal } = options;
    return this.op('test', '', signal, async (s) => {
      // A listing, not only a LOOKUP: a base the identity may not read fails here, not on the first job.
      await s.nfs.readdirplus(s.base, ZERO_VERF, ZERO_VERF, signal);
      const e = this.endpoint;
      return `NFSv3 export ${s.exportPath} on ${e.host}:${e.port} (MOUNT port ${s.mountPort}): base ${e.path} is a listable directory, ` +
        `acting as ${e.identity}; reads up to ${kib(s.info.rtmax)}, writes up to ${kib(s.info.wtmax)} per request`;
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    const session = this.session;
    this.session = null;
    await session?.then((s) => s.nfs.rpc.close(), () => undefined);
  }

  /** Runs `fn` on the session, mapping errors; a stale handle sets the session up again and retries once. */
  private async op<T>(op: string, rel: string, signal: Signal, fn: (s: Session) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn(await this.ready(signal));
      } catch (err) {
        const status = nfsStatus(err);
        if (attempt === 0 && (status === STALE || status === BADHANDLE)) {
          await this.reset();
          continue;
        }
        throw this.error(err, op, rel, signal);
      }
    }
  }

  private error(err: unknown, op: string, rel: string, signal: Signal): ConnectorError {
    if (signal?.aborted) return new ConnectorError('TRANSIENT', `${op} ${shownPath(rel)}: aborted`, { cause: err });
    // test() is about the connection as a whole: its messages name the base path as configured.
    if (op === 'test') return nfsError(err, 'base path', this.endpoint.path, this.endpoint.identity);
    return nfsError(err, op, rel, this.endpoint.identity);
  }

  private async reset(): Promise<void> {
    const session = this.session;
    this.session = null;
    this.dirs.clear();
    await session?.then((s) => s.nfs.rpc.close(), () => undefined);
  }

  /** The session, set up on first use: MOUNT port, MNT, LOOKUP to the base, FSINFO. A failed setup is tried again next time. */
  private ready(signal: Signal): Promise<Session> {
    if (this.closed) return Promise.reject(new ConnectorError('TRANSIENT', 'the connector is closed'));
    this.session ??= this.setup(signal).catch((err: unknown) => {
      this.session = null;
      throw err;
    });
    return this.session;
  }

  private async setup(signal: Signal): Promise<Session> {
    const e = this.endpoint;
    const base = { host: e.host, auth: { uid: e.uid, gid: e.gid }, timeoutMs: this.tuning.timeoutMs, reservedPort: true, guard: this.access.network };
    const mountPort = e.mountPort ?? (await portOf(base, MOUNT_PROGRAM, 3, signal));
    const mounted = await mountBase(base, mountPort, e.path, signal);
    const nfs = new Nfs3(new RpcClient({ ...base, port: e.port, listener: 'an NFS server' }));
    try {
      let fh = mounted.root;
      let at = mounted.exportPath;
      for (const name of mounted.below) {
        at = at === '/' ? `/${name}` : `${at}/${name}`;
        fh = (await nfs.lookup(fh, name, signal).catch((err: unknown) => {
          if (nfsStatus(err) === NOENT) throw new ConnectorError('NOT_FOUND', `base path ${e.path} does not exist on ${e.host} (${at} is missing in export ${mounted.exportPath})`, { cause: err });
          throw err;
        })).fh;
      }
      const attrs = await nfs.getattr(fh, signal);
      if (attrs.type !== NF3DIR) throw new ConnectorError('CONFLICT', `base path ${e.path} on ${e.host} is not a directory`);
      const info = await nfs.fsinfo(fh, signal);
      return { nfs, base: fh, exportPath: mounted.exportPath, mountPort, info };
    } catch (err) {
      await nfs.rpc.close();
      throw err;
    }
  }

  /** The handle and attributes of `rel`, or null when it (or a parent) does not exist. */
  private async find(s: Session, rel: string, signal: Signal): Promise<{ fh: FileHandle; attrs: Attributes } | null> {
    if (rel === '') return { fh: s.base, attrs: await s.nfs.getattr(s.base, signal) };
    let dir: FileHandle;
    try {
      dir = await this.directory(s, parentOf(rel), signal);
    } catch (err) {
      if (err instanceof ConnectorError && err.code === 'NOT_FOUND') return null;
      throw err;
    }
    try {
      const { fh, attrs } = await s.nfs.lookup(dir, baseName(rel), signal);
      return { fh, attrs: attrs ?? (await s.nfs.getattr(fh, signal)) };
    } catch (err) {
      if (nfsStatus(err) === NOENT) return null;
      throw err;
    }
  }

  /** The handle of directory `rel`: NOT_FOUND when missing, CONFLICT when a file is there. */
  private async directory(s: Session, rel: string, signal: Signal): Promise<FileHandle> {
    if (rel === '') return s.base;
    const cached = this.dirs.get(rel);
    if (cached) return cached;
    const parent = await this.directory(s, parentOf(rel), signal);
    const { fh, attrs } = await s.nfs.lookup(parent, baseName(rel), signal).catch((err: unknown) => {
      if (nfsStatus(err) === NOENT) throw new ConnectorError('NOT_FOUND', `${rel}: does not exist`, { cause: err });
      throw err;
    });
    if ((attrs ?? (await s.nfs.getattr(fh, signal))).type !== NF3DIR) throw new ConnectorError('CONFLICT', `${rel}: not a directory`);
    this.remember(rel, fh);
    return fh;
  }

  /** mkdir -p of `rel`; resolves with its handle. A file in the way is CONFLICT. */
  private async mkdirs(s: Session, rel: string, signal: Signal): Promise<FileHandle> {
    if (rel === '') return s.base;
    const cached = this.dirs.get(rel);
    if (cached) return cached;
    const parent = await this.mkdirs(s, parentOf(rel), signal);
    const name = baseName(rel);
    let fh: FileHandle;
    try {
      fh = await s.nfs.mkdir(parent, name, signal);
    } catch (err) {
      if (nfsStatus(err) !== EXIST) throw err;
      // There already (or made meanwhile by a parallel write): fine if it is a directory.
      const found = await s.nfs.lookup(parent, name, signal);
      if ((found.attrs ?? (await s.nfs.getattr(found.fh, signal))).type !== NF3DIR) throw new ConnectorError('CONFLICT', `${rel}: a file is in the way`);
      fh = found.fh;
    }
    this.remember(rel, fh);
    return fh;
  }

  /** Removes `name` in `parent`: a file, or (with its handle) a directory emptied first. */
  private async removeChild(s: Session, parent: FileHandle, name: string, dir: FileHandle | null, signal: Signal): Promise<void> {
    const ignoreMissing = (err: unknown) => {
      if (nfsStatus(err) !== NOENT) throw err;
    };
    if (!dir) {
      await s.nfs.remove(parent, name, signal).catch(ignoreMissing);
      return;
    }
    // Each pass starts from the first cookie: removing entries may invalidate later cookies.
    let cookie: Buffer = ZERO_VERF;
    let verf: Buffer = ZERO_VERF;
    for (;;) {
      const page = await s.nfs.readdirplus(dir, cookie, verf, signal);
      for (const entry of page.entries) {
        const attrs = entry.attrs ?? (await s.nfs.lookup(dir, entry.name, signal)).attrs;
        const fh = attrs?.type === NF3DIR ? (entry.fh ?? (await s.nfs.lookup(dir, entry.name, signal)).fh) : null;
        await this.removeChild(s, dir, entry.name, fh, signal);
      }
      if (page.entries.length === 0 && page.eof) break;
      [cookie, verf] = page.entries.length === 0 ? [page.cookie, page.cookieverf] : [ZERO_VERF, ZERO_VERF];
    }
    await s.nfs.rmdir(parent, name, signal).catch(ignoreMissing);
  }

  /** Depth-first, one READDIRPLUS page (at most 64 KiB) held per directory level. */
  private async *walk(s: Session, dir: FileHandle, relDir: string, recursive: boolean, signal: Signal): AsyncGenerator<Entry> {
    let cookie: Buffer = ZERO_VERF;
    let verf: Buffer = ZERO_VERF;
    for (;;) {
      const page = await this.op('list', relDir, signal, () => s.nfs.readdirplus(dir, cookie, verf, signal));
      for (const item of page.entries) {
        const rel = joinRel(relDir, item.name);
        const attrs = item.attrs ?? (await this.op('list', rel, signal, async () => (await s.nfs.lookup(dir, item.name, signal)).attrs));
        const entry = attrs && toEntry(rel, attrs);
        if (!entry) continue;
        yield entry;
        if (recursive && entry.kind === 'directory') {
          const fh = item.fh ?? (await this.op('list', rel, signal, async () => (await s.nfs.lookup(dir, item.name, signal)).fh));
          yield* this.walk(s, fh, rel, recursive, signal);
        }
      }
      if (page.eof) return;
      cookie = page.cookie;
      verf = page.cookieverf;
    }
  }

  private remember(rel: string, fh: FileHandle): void {
    if (this.dirs.size >= MAX_CACHED_DIRS) this.dirs.clear();
    this.dirs.set(rel, fh);
  }

  /** Forgets cached handles of `rel` and below (removed or renamed). */
  private forget(rel: string): void {
    for (const key of this.dirs.keys()) if (key === rel || key.startsWith(`${rel}/`)) this.dirs.delete(key);
  }
}

/** Files and directories; symbolic links (the server does not follow them: they may point anywhere on a client) and special files are skipped. */
function toEntry(rel: string, attrs: Attributes): Entry | null {
  if (attrs.type === NF3DIR) return { path: rel, kind: 'directory', size: 0, modifiedAt: attrs.mtime };
  if (attrs.type === NF3REG) return { path: rel, kind: 'file', size: attrs.size, modifiedAt: attrs.mtime };
  return null;
}


function kib(bytes: number): string {
  return bytes >= 1024 * 1024 ? `${bytes / (1024 * 1024)} MiB` : `${Math.round(bytes / 1024)} KiB`;
}

/**
 * The nfs connector of a connection: on an export mounted on the agent host when
 * options.mount_path is set (the fs connector on that directory), else the userspace client.
 */
export function createNfsConnector(settings: ConnectionSettings, context?: ConnectorContext): Connector {
  const mountPath = mountPathOf(settings);
  const access = context?.access ?? closedAccess();
  return mountPath ? new MountedNfsConnector(mountPath, settings.path || '/', access) : new NfsConnector(settings, {}, access);
}

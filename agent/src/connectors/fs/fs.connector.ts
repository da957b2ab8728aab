import { constants, type Stats } from 'node:fs';
import { access, lstat, mkdir, open, opendir, realpath, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import type { ConnectionSettings, ConnectionType } from '@xfer/shared';
import { joinRel, relativePath } from '../paths.js';
import { ConnectorError, type Connector, type ConnectorCapabilities, type Entry, type WriteOptions, type WriteResult } from '../types.js';
import { closedAccess, type AgentAccess } from '../access.js';
import { fsError } from './fs-errors.js';
import { FileReadStream } from './fs-read-stream.js';

export interface FsConnectorOptions {
  /** Absolute directory on the agent's host that every connector path is relative to. */
  root: string;
  /** Type the connector reports (the connection type it serves); default `nfs` (an export mounted on the host). */
  type?: ConnectionType;
  /** fsync each written file before `write` resolves (default true), so a verified file survives a crash. */
  fsync?: boolean;
  /**
   * The local directories the agent's owner allows (connectors/access.ts): `root` must lie in one,
   * by its path and by its real path. Default `closedAccess()`: no directory at all.
   */
  access?: AgentAccess;
}

const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;

/**
 * A directory of the agent's host as a connector (node:fs). Real directories and an atomic
 * `rename`, so the engine writes to a temporary name and renames once verified.
 *
 * Confinement: paths are normalized by `relativePath` (no `..` above the base), and then every
 * operation checks that the real path of the deepest existing ancestor lies inside the real base
 * directory, so a symbolic link inside the base cannot lead out of it. Listings report symbolic
 * links to files inside the base as files, and skip links to directories (not followed: no
 * cycles, no file copied twice) and links that leave the base or dangle. A link swapped in
 * between the check and the open is refused for the last component (O_NOFOLLOW on writes).
 */
export class FsConnector implements Connector {
  readonly type: ConnectionType;
  readonly capabilities: ConnectorCapabilities = { rename: true, directories: true, modTime: 'set', modTimePrecision: 1 };
  private readonly root: string;
  private readonly fsync: boolean;
  private realRoot: Promise<string> | undefined;
  private readonly access: AgentAccess;

  constructor(options: FsConnectorOptions) {
    if (!isAbsolute(options.root)) throw new ConnectorError('PERMISSION', 'the base directory must be an absolute path');
    this.root = resolve(options.root);
    this.access = options.access ?? closedAccess();
    this.access.checkRoot(this.root);
    this.type = options.type ?? 'nfs';
    this.fsync = options.fsync ?? true;
  }

  async *list(path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
    const rel = relativePath(path);
    const abs = await this.resolve(rel);
    let top: Stats;
    try {
      top = await stat(abs);
    } catch (err) {
      throw fsError(err, rel);
    }
    if (!top.isDirectory()) throw new ConnectorError('CONFLICT', `${rel || '/'}: not a directory`);
    yield* this.walk(abs, rel, options.recursive, options.signal);
  }

  async stat(path: string, _options?: { signal?: AbortSignal }): Promise<Entry | null> {
    const rel = relativePath(path);
    let abs: string;
    try {
      abs = await this.resolve(rel);
      return toEntry(rel, await stat(abs));
    } catch (err) {
      const mapped = fsError(err, rel);
      if (mapped.code === 'NOT_FOUND') return null;
      throw mapped;
    }
  }

  async read(path: string, options: { start?: number; end?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    const rel = relativePath(path);
    const abs = await this.resolve(rel);
    let handle: FileHandle | undefined;
    try {
      handle = await open(abs, constants.O_RDONLY);
      const info = await handle.stat();
      if (!info.isFile()) throw new ConnectorError('CONFLICT', `${rel || '/'}: not a file`);
    } catch (err) {
      await handle?.close().catch(() => {});
      throw fsError(err, rel);
    }
    const stream = new FileReadStream(handle, rel, options.start ?? 0, options.end ?? Number.MAX_SAFE_INTEGER);
    if (options.signal) {
      const signal = options.signal;
      if (signal.aborted) stream.destroy(signal.reason as Error);
      else {
        const onAbort = () => stream.destroy(abortError(signal));
        signal.addEventListener('abort', onAbort, { once: true });
        stream.once('close', () => signal.removeEventListener('abort', onAbort));
      }
    }
    return stream;
  }

  async write(path: string, body: Readable, options: WriteOptions): Promise<WriteResult> {
    // Until the loop below consumes it, an error of the body would otherwise go unhandled.
    let bodyError: unknown = null;
    const onBodyError = (err: unknown) => { bodyError ??= err; };
    body.on('error', onBodyError);
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('CONFLICT', 'cannot write to the base directory itself');
    // The last component is opened with O_NOFOLLOW, so only the parent needs the real-path check.
    const abs = await this.resolve(rel, { leaf: 'lstat' });
    const signal = options.signal;
    const onAbort = () => body.destroy(abortError(signal!));
    let handle: FileHandle | undefined;
    let size = 0;
    try {
      signal?.throwIfAborted();
      signal?.addEventListener('abort', onAbort, { once: true });
      handle = await withParent(abs, () => open(abs, WRITE_FLAGS, 0o644));
      if (bodyError) throw bodyError;
      for await (const chunk of body) {
        const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
        await writeAll(handle, buffer);
        size += buffer.length;
      }
      signal?.throwIfAborted();
      // On the open handle, after the last byte: nothing written later moves it (a rename keeps it).
      if (options.modifiedAt) await handle.utimes(options.modifiedAt, options.modifiedAt);
      if (this.fsync) await handle.sync();
      await handle.close();
      handle = undefined;
      return { size };
    } catch (err) {
      body.destroy();
      await handle?.close().catch(() => {});
      // Only remove what this call created: a refused open (e.g. a symlink, O_NOFOLLOW) wrote nothing.
      if (handle !== undefined || size > 0) await rm(abs, { force: true }).catch(() => {});
      throw fsError(err, rel);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      body.off('error', onBodyError);
    }
  }

  async mkdir(path: string, _options?: { signal?: AbortSignal }): Promise<void> {
    const rel = relativePath(path);
    const abs = await this.resolve(rel);
    try {
      await mkdir(abs, { recursive: true });
    } catch (err) {
      throw fsError(err, rel);
    }
  }

  async remove(path: string, _options?: { signal?: AbortSignal }): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('PERMISSION', 'refusing to remove the base directory itself');
    const abs = await this.resolve(rel, { leaf: 'lstat' });
    try {
      await rm(abs, { recursive: true, force: true });
    } catch (err) {
      throw fsError(err, rel);
    }
  }

  async rename(from: string, to: string, _options?: { signal?: AbortSignal }): Promise<void> {
    const relFrom = relativePath(from);
    const relTo = relativePath(to);
    if (relFrom === '' || relTo === '') throw new ConnectorError('PERMISSION', 'cannot rename the base directory itself');
    const absFrom = await this.resolve(relFrom, { leaf: 'lstat' });
    const absTo = await this.resolve(relTo, { leaf: 'lstat' });
    try {
      await withParent(absTo, () => rename(absFrom, absTo));
    } catch (err) {
      throw fsError(err, relFrom);
    }
  }

  async test(_options?: { signal?: AbortSignal }): Promise<string> {
    await this.allowed();
    try {
      const info = await stat(this.root);
      if (!info.isDirectory()) throw new ConnectorError('NOT_FOUND', `${this.root} is not a directory`);
      await access(this.root, constants.R_OK | constants.W_OK | constants.X_OK);
    } catch (err) {
      const mapped = fsError(err, '');
      throw new ConnectorError(mapped.code, `directory ${this.root}: ${mapped.message.replace(/^\/: /, '')}`, { cause: err });
    }
    return `directory ${this.root} is readable and writable`;
  }

  async close(): Promise<void> {}

  private baseReal(): Promise<string> {
    this.realRoot ??= realpath(this.root).then(async (real) => {
      await this.access.checkRealRoot(this.root, real);
      return real;
    }, (err: unknown) => {
      this.realRoot = undefined;
      const mapped = fsError(err, '');
      throw new ConnectorError(mapped.code, `base directory ${this.root}: ${mapped.message.replace(/^\/: /, '')}`, { cause: err });
    });
    return this.realRoot;
  }

  /**
   * Refuses (PERMISSION) a base directory whose real path leaves the allowed roots; a missing
   * base directory passes here (the caller reports it as it does).
   */
  protected async allowed(): Promise<void> {
    await this.baseReal().catch((err: unknown) => {
      if (err instanceof ConnectorError && err.code === 'PERMISSION') throw err;
    });
  }

  /**
   * The host path of `rel` after checking that neither it nor any existing ancestor resolves
   * outside the base. With `leaf: 'lstat'` a symbolic link as the last component is the object
   * itself (remove, rename act on the link), so only its parent has to be inside.
   */
  private async resolve(rel: string, options: { leaf?: 'follow' | 'lstat' } = {}): Promise<string> {
    const base = await this.baseReal();
    const abs = rel === '' ? this.root : join(this.root, rel);
    let probe = options.leaf === 'lstat' && rel !== '' ? dirname(abs) : abs;
    for (;;) {
      try {
        const real = await realpath(probe);
        if (real !== base && !real.startsWith(base.endsWith(sep) ? base : base + sep)) {
          throw new ConnectorError('PERMISSION', `path escapes the connection's base path: ${JSON.stringify(rel)}`);
        }
        return abs;
      } catch (err) {
        if (err instanceof ConnectorError) throw err;
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'ENOENT' && code !== 'ENOTDIR') throw fsError(err, rel);
        // Missing: fine unless it is a dangling symbolic link, whose target may be anywhere.
        const link = await lstat(probe).catch(() => null);
        if (link?.isSymbolicLink()) throw new ConnectorError('PERMISSION', `path goes through a dangling symbolic link: ${JSON.stringify(rel)}`);
        if (probe === this.root) throw fsError(err, '');
        probe = dirname(probe);
      }
    }
  }

  private async *walk(absDir: string, relDir: string, recursive: boolean, signal?: AbortSignal): AsyncGenerator<Entry> {
    let dir;
    try {
      dir = await opendir(absDir, { bufferSize: 64 });
    } catch (err) {
      throw fsError(err, relDir);
    }
    try {
      for (;;) {
        if (signal?.aborted) throw fsError(abortError(signal), relDir);
        let dirent;
        try {
          dirent = await dir.read();
        } catch (err) {
          throw fsError(err, relDir);
        }
        if (dirent === null) break;
        const rel = joinRel(relDir, dirent.name);
        const abs = join(absDir, dirent.name);
        const entry = await this.entryOf(abs, rel, dirent.isSymbolicLink());
        if (!entry) continue;
        yield entry;
        if (recursive && entry.kind === 'directory') yield* this.walk(abs, rel, recursive, signal);
      }
    } finally {
      await dir.close().catch(() => {});
    }
  }

  /** The entry of one listed name, or null for what a listing skips (see the class comment). */
  private async entryOf(abs: string, rel: string, symlink: boolean): Promise<Entry | null> {
    try {
      if (!symlink) return toEntry(rel, await lstat(abs));
      const real = await realpath(abs);
      const base = await this.baseReal();
      if (!real.startsWith(base.endsWith(sep) ? base : base + sep)) return null;
      const info = await stat(abs);
      return info.isFile() ? toEntry(rel, info) : null;
    } catch (err) {
      // Gone since the directory was read, or a dangling link: nothing to list.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw fsError(err, rel);
    }
  }
}

function toEntry(rel: string, info: Stats): Entry | null {
  if (info.isDirectory()) return { path: rel, kind: 'directory', size: 0, modifiedAt: info.mtime };
  if (info.isFile()) return { path: rel, kind: 'file', size: info.size, modifiedAt: info.mtime };
  return null; // sockets, FIFOs and devices are not files to copy
}

/** Runs `op`; when it fails because the parent directory is missing, creates it and runs `op` again. */
async function withParent<T>(abs: string, op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    await mkdir(dirname(abs), { recursive: true });
    return await op();
  }
}

async function writeAll(handle: FileHandle, buffer: Buffer): Promise<void> {
  let offset = 0;
  while (offset < buffer.length) {
    const { bytesWritten } = await handle.write(buffer, offset, buffer.length - offset, null);
    offset += bytesWritten;
  }
}

function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  const err = new Error('aborted', { cause: reason });
  err.name = 'AbortError';
  return err;
}

/**
 * Factory for a connection whose `path` is a directory of the agent's host. Not in the
 * connection-type registry (no connection type means "a local directory"): tests, and later the
 * nfs connector's host-mount mode, build it directly.
 */
export function createFsConnector(settings: Pick<ConnectionSettings, 'type' | 'path'>, options: Omit<FsConnectorOptions, 'root' | 'type'> = {}): FsConnector {
  return new FsConnector({ ...options, root: settings.path, type: settings.type });
}

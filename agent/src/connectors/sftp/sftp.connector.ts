import { createHash } from 'node:crypto';
import { guardWrite } from '@xfer/storage';
import type { Readable } from 'node:stream';
import type { SFTPWrapper, Stats } from 'ssh2';
import type { ConnectionSettings } from '@xfer/shared';
import { joinRel, parentOf, relativePath, resolvePath, shownPath } from '../paths.js';
import { closedAccess, type AgentAccess } from '../access.js';
import { ConnectorError, type Connector, type ConnectorCapabilities, type ConnectorContext, type Entry, type RangeReader, type ServerCopyOptions, type WriteOptions, type WriteResult } from '../types.js';
import { DEFAULT_SFTP_TUNING, sameAccount, sftpEndpoint, type SftpEndpoint, type SftpTuning } from './sftp.config.js';
import { copyRange, isListedVersion, sourceChanged } from './sftp.copy.js';
import { SFTP_STATUS, sftpError, sftpStatus } from './sftp.errors.js';
import * as ops from './sftp.ops.js';
import { abortable, SftpSession, type SftpLease } from './sftp.session.js';
import { pipelinedWrite, sftpReadStream } from './sftp.streams.js';
import { ReadAtStream } from '../io/read-at.js';
import { abortedError } from '../aborted.js';


/** Bytes read with the size when a file is opened (see read). */
const PREFETCH_BYTES = 64 * 1024;
/** Unlinks in flight at once while removing a directory tree. */
const REMOVE_PARALLEL = 16;

/**
 * SFTP (SSH File Transfer Protocol v3, as OpenSSH serves it) through ssh2. Password or private
 * key (with passphrase) login, optional host key pinning (`options.host_key_sha256`), one SSH
 * connection with a few SFTP channels, pipelined reads and writes. Bytes land at the path as
 * they arrive: the engine writes a temporary name and renames (`capabilities.rename`).
 */
export class SftpConnector implements Connector {
  readonly type = 'sftp' as const;
  readonly capabilities: ConnectorCapabilities = { rename: true, directories: true, modTime: 'set', modTimePrecision: 1000, parallelReads: true };
  private readonly base: string;
  private readonly endpoint: SftpEndpoint;
  private readonly session: SftpSession;
  private readonly tuning: SftpTuning;

  constructor(settings: ConnectionSettings, tuning: Partial<SftpTuning> = {}, access: AgentAccess = closedAccess()) {
    this.tuning = { ...DEFAULT_SFTP_TUNING, ...tuning };
    this.base = settings.path || '/';
    this.endpoint = sftpEndpoint(settings, this.tuning);
    this.session = new SftpSession(this.endpoint, this.tuning, access.network);
  }

  async *list(path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
    const rel = relativePath(path);
    yield* this.walk(rel, this.remote(rel), options.recursive, options.signal, true);
  }

  async stat(path: string, options: { signal?: AbortSignal } = {}): Promise<Entry | null> {
    const rel = relativePath(path);
    try {
      const stats = await this.run(options.signal, 'stat', rel, (sftp) => ops.stat(sftp, this.remote(rel)));
      return toEntry(rel, stats);
    } catch (err) {
      if (err instanceof ConnectorError && err.code === 'NOT_FOUND') return null;
      throw err;
    }
  }

  async read(path: string, options: { start?: number; end?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    const rel = relativePath(path);
    const { signal } = options;
    const lease = await this.session.acquire(signal);
    let handle: Buffer | undefined;
    try {
      handle = await ops.openFile(lease.sftp, this.remote(rel), 'r');
      signal?.throwIfAborted();
      const start = options.start ?? 0;
      // The size and the first bytes in one round trip: most files fit in them. Not a whole chunk:
      // a 128 KiB buffer per small file was most of the agent's memory churn on many small files.
      const want = Math.min(PREFETCH_BYTES, this.tuning.chunkBytes, (options.end ?? Infinity) - start + 1);
      const [stats, first] = await Promise.allSettled([ops.fstat(lease.sftp, handle), want > 0 ? ops.readAt(lease.sftp, handle, want, start) : Promise.resolve(Buffer.alloc(0))]);
      if (stats.status === 'rejected') throw stats.reason;
      if (stats.value.isDirectory()) throw new ConnectorError('CONFLICT', `read ${shownPath(rel)}: is a directory`);
      if (first.status === 'rejected') throw first.reason;
      const end = Math.min(options.end ?? Infinity, stats.value.size - 1);
      return this.withAbort(sftpReadStream(lease.sftp, handle, rel, start, end, this.readTuning(lease), () => lease.release(), first.value), rel, signal);
    } catch (err) {
      if (handle) await ops.closeFile(lease.sftp, handle).catch(() => undefined);
      lease.release();
      throw sftpError(err, rel, 'read');
    }
  }

  /**
   * The file opened once on one channel for a stream of a multi-stream read: its segments are READs
   * of that handle, without an OPEN round trip each (a quarter of a 4 MiB segment's time over a
   * 50 ms round trip). The channel stays lent until `close`. Past the end the READs come back
   * empty and a range ends there.
   */
  async rangeReader(path: string, options: { signal?: AbortSignal } = {}): Promise<RangeReader> {
    const rel = relativePath(path);
    const lease = await this.session.acquire(options.signal);
    let handle: Buffer;
    try {
      handle = await ops.openFile(lease.sftp, this.remote(rel), 'r');
    } catch (err) {
      lease.release();
      throw sftpError(err, rel, 'read');
    }
    let closed: Promise<void> | null = null;
    return {
      read: async (start, end, signal) => {
        if (closed) throw new ConnectorError('TRANSIENT', `read ${shownPath(rel)}: the file was closed`);
        if (signal?.aborted) throw abortedError('read', rel, signal);
        return this.withAbort(sftpReadStream(lease.sftp, handle, rel, start, end, this.readTuning(lease), () => undefined, undefined, false), rel, signal);
      },
      close: () => (closed ??= ops.closeFile(lease.sftp, handle).catch(() => undefined).finally(() => lease.release())),
    };
  }

  /** A file's READs on the lent channel: as deep as its path needs (sftp.window.ts). */
  private readTuning(lease: SftpLease): { chunkBytes: number; depth: number } {
    return { chunkBytes: this.tuning.chunkBytes, depth: lease.readDepth };
  }

  /** `stream`, destroyed with an aborted error when `signal` aborts. */
  private withAbort(stream: Readable, rel: string, signal: AbortSignal | undefined): Readable {
    if (signal) {
      const onAbort = () => stream.destroy(abortedError('read', rel, signal));
      signal.addEventListener('abort', onAbort, { once: true });
      stream.once('close', () => signal.removeEventListener('abort', onAbort));
    }
    return stream;
  }

  async write(path: string, body: Readable, options: WriteOptions = {}): Promise<WriteResult> {
    const rel = relativePath(path);
    const { signal } = options;
    if (rel === '') throw new ConnectorError('CONFLICT', 'write: the base path is a directory, not a file');
    const remote = this.remote(rel);
    let lease: Awaited<ReturnType<SftpSession['acquire']>> | undefined;
    let handle: Buffer | undefined;
    let created = false;
    const cleanup = async () => {
      if (!lease || !created) return;
      // Leave nothing behind (only what this call created: a file we could not open stays as it was).
      if (handle) await ops.closeFile(lease.sftp, handle).catch(() => undefined);
      await ops.unlink(lease.sftp, remote).catch(() => undefined);
    };
    try {
      return await guardWrite(body, { signal, aborted: () => abortedError('write', rel, signal!), mapError: (err) => sftpError(err, rel, 'write'), cleanup }, async () => {
        lease = await this.session.acquire(signal);
        const sftp = lease.sftp;
        // Read and write when the engine will read the file back: through this handle, not a new one.
        handle = await this.openForWrite(sftp, rel, remote, options.readBack ? 'w+' : 'w');
        created = true;
        const size = await pipelinedWrite(sftp, handle, body, this.tuning);
        // FSETSTAT after every write was answered (SFTP v3 keeps whole seconds); a rename keeps it.
        if (options.modifiedAt) await ops.futimes(sftp, handle, options.modifiedAt);
        const readBack = options.readBack ? await this.readBack(sftp, lease.readDepth, handle, rel, size, signal) : undefined;
        const closing = handle;
        handle = undefined;
        await ops.closeFile(sftp, closing);
        return { size, ...(readBack ? { readBack } : {}) };
      });
    } finally {
      lease?.release();
    }
  }

  /**
   * Server-side copy with the `copy-data` extension (docs/connectors.md "Server-side copies"):
   * only from another sftp connector of the same server and credentials (`sameAccount`), and only
   * where the server announced the extension; else null before any request, and the bytes move.
   * Everything happens on one channel of this connector's session (copy-data copies between two
   * handles of one server process): the source is opened at the path its own connector would open
   * (its base path; nothing it could not read), checked to be the listed version, copied into the
   * engine's temporary name beside `path` (`tempPath`; opened as `write` opens a file), checked
   * again with the copy's size, given the kept modification time, and renamed into place. Nothing
   * of it remains when anything fails.
   */
  async copyFrom(source: Connector, sourcePath: string, path: string, options: ServerCopyOptions): Promise<WriteResult | null> {
    const { entry, signal } = options;
    if (!(source instanceof SftpConnector) || entry.kind !== 'file' || options.tempPath === undefined || !sameAccount(this.endpoint, source.endpoint)) return null;
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('CONFLICT', 'copy: the base path is a directory, not a file');
    const fromRel = relativePath(sourcePath);
    const from = source.remote(fromRel);
    // Beside `path` (checked as any path).
    const tempRel = relativePath(options.tempPath);
    const temp = this.remote(tempRel);
    const lease = await this.session.acquire(signal);
    const sftp = lease.sftp;
    if (!ops.announced(sftp, 'copy-data')) {
      lease.release();
      return null;
    }
    let fromHandle: Buffer | undefined;
    let toHandle: Buffer | undefined;
    let created = false;
    try {
      fromHandle = await ops.openFile(sftp, from, 'r').catch((err: unknown) => {
        throw sftpError(err, fromRel, 'read');
      });
      const before = await ops.fstat(sftp, fromHandle);
      if (!isListedVersion(before, entry)) throw sourceChanged(fromRel, before, entry, 'before the copy');
      if (signal?.aborted) throw abortedError('copy', rel, signal);
      // Asked only now that the copy goes ahead (it may cost a stat of the source).
      const modifiedAt = await options.modifiedAt?.();
      // Read-write when the copy is to be read back (verify=checksum).
      const reread = options.verify !== 'size';
      toHandle = await this.openForWrite(sftp, tempRel, temp, reread ? 'w+' : 'w');
      created = true;
      await copyRange(sftp, fromHandle, toHandle, entry.size, { chunkBytes: this.tuning.copyDataBytes, signal, rel: fromRel });
      if (reread) {
        // No store checksum vouches for the server's copy: the source and the copy are read back
        // through their open handles and compared (two reads, where moving the bytes costs a read,
        // a write and a read back).
        const [a, b] = await Promise.all([this.readBack(sftp, lease.readDepth, fromHandle, fromRel, entry.size, signal), this.readBack(sftp, lease.readDepth, toHandle, tempRel, entry.size, signal)]);
        if (a.bytes !== entry.size || b.bytes !== entry.size || a.sha256 !== b.sha256) {
          throw new ConnectorError('TRANSIENT', `copy ${shownPath(rel)}: the server's copy read back differs from its source (${b.bytes} bytes of ${a.bytes}, sha256 ${a.sha256 === b.sha256 ? 'equal' : 'different'}); it was removed`);
        }
      }
      // The handle still reads the file that was copied (a rename over its path since the open
      // does not change it): unchanged since the open, it is the version listed.
      const [after, copied] = await Promise.all([ops.fstat(sftp, fromHandle), ops.fstat(sftp, toHandle)]);
      if (!isListedVersion(after, entry)) throw sourceChanged(fromRel, after, entry, 'during the copy');
      if (copied.size !== entry.size) {
        throw new ConnectorError('TRANSIENT', `copy ${shownPath(rel)}: the server's copy holds ${copied.size} bytes of ${entry.size}; it was removed`);
      }
      if (modifiedAt) await ops.futimes(sftp, toHandle, modifiedAt);
      const closing = toHandle;
      toHandle = undefined;
      await ops.closeFile(sftp, closing);
      await this.replace(sftp, temp, this.remote(rel));
      created = false;
      return { size: entry.size, storeVerified: reread ? 'server-copy-reread' : 'server-copy-size' };
    } catch (err) {
      // No signal here: the clean-up runs after a cancel too.
      if (toHandle) await ops.closeFile(sftp, toHandle).catch(() => undefined);
      if (created) await ops.unlink(sftp, temp).catch(() => undefined);
      throw sftpError(err, rel, 'copy');
    } finally {
      if (fromHandle) await ops.closeFile(sftp, fromHandle).catch(() => undefined);
      lease.release();
    }
  }

  async mkdir(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    await this.run(options.signal, 'mkdir', rel, (sftp) => this.mkdirs(sftp, rel));
  }

  async remove(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('PERMISSION', "remove: refusing to remove the connection's base path");
    await this.run(options.signal, 'remove', rel, async (sftp) => {
      const remote = this.remote(rel);
      let stats: Stats;
      try {
        stats = await ops.lstat(sftp, remote);
      } catch (err) {
        if (sftpStatus(err) === SFTP_STATUS.NO_SUCH_FILE) return;
        throw err;
      }
      if (stats.isDirectory()) await this.removeTree(sftp, remote, options.signal);
      else await ignoreMissing(ops.unlink(sftp, remote));
    });
  }

  async rename(from: string, to: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const relFrom = relativePath(from);
    const relTo = relativePath(to);
    if (relFrom === '' || relTo === '') throw new ConnectorError('PERMISSION', "rename: the connection's base path cannot be renamed or replaced");
    await this.run(options.signal, 'rename', relFrom, async (sftp) => {
      const src = this.remote(relFrom);
      const dst = this.remote(relTo);
      try {
        await this.replace(sftp, src, dst);
      } catch (err) {
        // The source exists but the target's directory does not: create it, then once more.
        if (sftpStatus(err) !== SFTP_STATUS.NO_SUCH_FILE || !(await exists(sftp, src))) throw err;
        await this.mkdirs(sftp, parentOf(relTo));
        await this.replace(sftp, src, dst);
      }
    });
  }

  async test(options: { signal?: AbortSignal } = {}): Promise<string> {
    await this.session.connect(options.signal);
    const stats = await this.run(options.signal, 'test', '', (sftp) => ops.stat(sftp, this.base)).catch((err: unknown) => {
      if (err instanceof ConnectorError && err.code === 'NOT_FOUND') {
        throw new ConnectorError('NOT_FOUND', `connected to ${this.endpoint.where}, but the base path ${this.base} does not exist`, { cause: err });
      }
      throw err;
    });
    if (!stats.isDirectory()) throw new ConnectorError('CONFLICT', `connected to ${this.endpoint.where}, but the base path ${this.base} is not a directory`);
    const key = this.endpoint.pinned
      ? `host key ${this.session.hostKeyFingerprint} matches the pinned one`
      : `host key ${this.session.hostKeyFingerprint} (not pinned: set options.host_key_sha256 to pin it)`;
    return `Connected to ${this.endpoint.where}; ${this.base} is a directory; ${key}`;
  }

  async close(): Promise<void> {
    await this.session.close();
  }

  private remote(rel: string): string {
    return resolvePath(this.base, rel);
  }

  /** Runs `fn` on a lent channel, mapping its errors for `op` on `rel`. */
  private async run<T>(signal: AbortSignal | undefined, op: string, rel: string, fn: (sftp: SFTPWrapper) => Promise<T>): Promise<T> {
    const lease = await this.session.acquire(signal);
    try {
      return await abortable(fn(lease.sftp), signal, `${op} ${shownPath(rel)}`);
    } catch (err) {
      throw sftpError(err, rel, op);
    } finally {
      lease.release();
    }
  }

  /**
   * Entries of one directory, then (recursive) each subdirectory's right after it: depth-first,
   * one directory listing in memory per level. Symlinks are followed to files only (a link to a
   * directory could loop); other special files are skipped.
   */
  private async *walk(rel: string, remote: string, recursive: boolean, signal: AbortSignal | undefined, top: boolean): AsyncGenerator<Entry> {
    const listing = await this.run(signal, 'list', rel, (sftp) => ops.readdir(sftp, remote)).catch(async (err: unknown) => {
      // OpenSSH answers "no such file" for a file too (ENOTDIR): say which it is.
      if (top && err instanceof ConnectorError && err.code === 'NOT_FOUND' && (await this.stat(rel, { signal }))?.kind === 'file') {
        throw new ConnectorError('CONFLICT', `list ${shownPath(rel)}: is a file, not a directory`);
      }
      throw err;
    });
    listing.sort((a, b) => (a.filename < b.filename ? -1 : a.filename > b.filename ? 1 : 0));
    for (const item of listing) {
      if (item.filename === '.' || item.filename === '..') continue;
      const childRel = joinRel(rel, item.filename);
      const childRemote = remote === '/' ? `/${item.filename}` : `${remote}/${item.filename}`;
      let stats: Stats = item.attrs;
      if (stats.isSymbolicLink()) {
        const target = await this.run(signal, 'list', childRel, (sftp) => ops.stat(sftp, childRemote)).catch(() => null);
        if (!target?.isFile()) continue;
        stats = target;
      }
      const entry = toEntry(childRel, stats);
      if (!entry) continue;
      yield entry;
      if (recursive && entry.kind === 'directory') yield* this.walk(childRel, childRemote, true, signal, false);
    }
  }

  /**
   * The SHA-256 of what the server holds, read through the handle the file was written with
   * (WriteOptions.readBack): the same pipelined READs as `read`, without the open and close round
   * trips, and on the channel the write already holds. The handle stays open for the caller.
   */
  private async readBack(sftp: SFTPWrapper, depth: number, handle: Buffer, rel: string, size: number, signal: AbortSignal | undefined): Promise<{ sha256: string; bytes: number }> {
    const hash = createHash('sha256');
    let bytes = 0;
    // One READ past the end, so a file longer than what was written shows as more bytes.
    const stream = new ReadAtStream(0, size, {
      readAt: async (offset, length) => ({ data: await ops.readAt(sftp, handle, length, offset) }),
      fail: (err) => sftpError(err, rel, 'read back'),
      chunkBytes: this.tuning.chunkBytes,
      depth,
      signal,
      aborted: () => abortedError('read back', rel, signal!),
    });
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      hash.update(chunk);
      bytes += chunk.length;
    }
    return { sha256: hash.digest('hex'), bytes };
  }

  /** Opens for writing (create, truncate), creating missing parent directories on the way; `w+` to read it back too. */
  private async openForWrite(sftp: SFTPWrapper, rel: string, remote: string, flags: 'w' | 'w+' = 'w'): Promise<Buffer> {
    try {
      return await ops.openFile(sftp, remote, flags);
    } catch (err) {
      const status = sftpStatus(err);
      if (status === SFTP_STATUS.NO_SUCH_FILE) {
        // Optimistic: the parent usually exists, so only a miss costs the extra round trips.
        await this.mkdirs(sftp, parentOf(rel));
        return ops.openFile(sftp, remote, flags);
      }
      if (status === SFTP_STATUS.FAILURE && (await ops.stat(sftp, remote).catch(() => null))?.isDirectory()) {
        throw new ConnectorError('CONFLICT', `write ${rel}: a directory is in the way`, { cause: err });
      }
      throw err;
    }
  }

  /** mkdir -p of `rel`: parents first only when the server says they are missing. */
  private async mkdirs(sftp: SFTPWrapper, rel: string): Promise<void> {
    const remote = this.remote(rel);
    try {
      await ops.mkdir(sftp, remote);
      return;
    } catch (err) {
      const status = sftpStatus(err);
      if (status === SFTP_STATUS.NO_SUCH_FILE && rel !== '') {
        await this.mkdirs(sftp, parentOf(rel));
        try {
          await ops.mkdir(sftp, remote);
          return;
        } catch (again) {
          if (sftpStatus(again) !== SFTP_STATUS.FAILURE) throw again;
        }
      } else if (status !== SFTP_STATUS.FAILURE && status !== SFTP_STATUS.PERMISSION_DENIED) throw err;
      // It may exist already (mkdir of an existing directory fails, or is refused where we may not write).
      const stats = await ops.stat(sftp, remote).catch(() => null);
      if (stats?.isDirectory()) return;
      if (stats) throw new ConnectorError('CONFLICT', `mkdir ${shownPath(rel)}: a file is in the way`, { cause: err });
      throw err;
    }
  }

  private async removeTree(sftp: SFTPWrapper, remote: string, signal: AbortSignal | undefined): Promise<void> {
    const listing = await ignoreMissing(ops.readdir(sftp, remote));
    const files: string[] = [];
    for (const item of listing ?? []) {
      if (item.filename === '.' || item.filename === '..') continue;
      const child = `${remote}/${item.filename}`;
      if (item.attrs.isDirectory()) await this.removeTree(sftp, child, signal);
      else files.push(child);
    }
    for (let i = 0; i < files.length; i += REMOVE_PARALLEL) {
      signal?.throwIfAborted();
      await Promise.all(files.slice(i, i + REMOVE_PARALLEL).map((f) => ignoreMissing(ops.unlink(sftp, f))));
    }
    await ignoreMissing(ops.rmdir(sftp, remote));
  }

  /** Renames `src` over `dst`: atomically with posix-rename, else by removing a file target first. */
  private async replace(sftp: SFTPWrapper, src: string, dst: string): Promise<void> {
    const atomic = ops.posixRename(sftp, src, dst);
    if (atomic) return atomic;
    try {
      await ops.rename(sftp, src, dst);
    } catch (err) {
      // SFTP v3 rename refuses an existing target (FAILURE): a file in the way is replaced.
      if (sftpStatus(err) !== SFTP_STATUS.FAILURE) throw err;
      const target = await ops.lstat(sftp, dst).catch(() => null);
      if (!target || target.isDirectory()) throw err;
      await ignoreMissing(ops.unlink(sftp, dst));
      await ops.rename(sftp, src, dst);
    }
  }
}

function toEntry(rel: string, stats: Stats): Entry | null {
  const modifiedAt = stats.mtime ? new Date(stats.mtime * 1000) : undefined;
  if (stats.isDirectory()) return { path: rel, kind: 'directory', size: 0, modifiedAt };
  if (stats.isFile()) return { path: rel, kind: 'file', size: stats.size, modifiedAt };
  return null;
}


async function exists(sftp: SFTPWrapper, remote: string): Promise<boolean> {
  return ops.lstat(sftp, remote).then(() => true, () => false);
}

/** `promise`'s value, or undefined when the server says the path does not exist (idempotent removal). */
async function ignoreMissing<T>(promise: Promise<T>): Promise<T | undefined> {
  try {
    return await promise;
  } catch (err) {
    if (sftpStatus(err) === SFTP_STATUS.NO_SUCH_FILE) return undefined;
    throw err;
  }
}

/** The registry's factory for `sftp` connections. */
export function createSftpConnector(settings: ConnectionSettings, context?: ConnectorContext): Connector {
  return new SftpConnector(settings, {}, context?.access);
}

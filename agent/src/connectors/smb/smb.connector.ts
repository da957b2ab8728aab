import { guardWrite } from '@xfer/storage';
import { Readable } from 'node:stream';
import type { ConnectionSettings } from '@xfer/shared';
import { joinRel, parentOf, relativePath, shownPath } from '../paths.js';
import { abortedError } from '../aborted.js';
import { closedAccess, type AgentAccess } from '../access.js';
import { ConnectorError, type Connector, type ConnectorCapabilities, type ConnectorContext, type Entry, type WriteOptions, type WriteResult } from '../types.js';
import type { DirectoryEntry, SmbClient, SmbHandle } from './smb.client.js';
import { DEFAULT_SMB_TUNING, smbEndpoint, type SmbEndpoint, type SmbTuning } from './smb.config.js';
import { SmbConnectionError } from './smb.connection.js';
import { smbError } from './smb.errors.js';
import { Access, CreateOption, Disposition, FileAttribute, Share, SmbStatusError, Status, dialectName } from './smb.protocol.js';
import { SmbSession } from './smb.session.js';
import { readStream, writeBody } from './smb.streams.js';

const MISSING: readonly number[] = [Status.OBJECT_NAME_NOT_FOUND, Status.OBJECT_PATH_NOT_FOUND, Status.NO_SUCH_FILE, Status.NOT_A_DIRECTORY];
const READ_ATTRS = Access.READ_ATTRIBUTES | Access.SYNCHRONIZE;

/**
 * SMB2/3 (2.0.2 to 3.0.2) through the client in this folder: NTLMv2 over SPNEGO, every request
 * signed and every answer checked, one session per connector multiplexing concurrent
 * operations, pipelined READs and WRITEs. Bytes land at the path as they arrive: the engine
 * writes a temporary name, verifies and renames (SET_INFO FileRenameInformation, replacing).
 */
export class SmbConnector implements Connector {
  readonly type = 'smb' as const;
  readonly capabilities: ConnectorCapabilities = { rename: true, directories: true, modTime: 'set', modTimePrecision: 1 };
  private readonly endpoint: SmbEndpoint;
  private readonly tuning: SmbTuning;
  private readonly session: SmbSession;

  constructor(settings: ConnectionSettings, tuning: Partial<SmbTuning> = {}, access: AgentAccess = closedAccess()) {
    this.endpoint = smbEndpoint(settings);
    this.tuning = { ...DEFAULT_SMB_TUNING, ...tuning };
    this.session = new SmbSession({ ...this.endpoint, timeoutMs: this.tuning.timeoutMs, dialects: this.tuning.dialects, guard: access.network }, this.endpoint.where);
  }

  async *list(path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
    const rel = relativePath(path);
    yield* this.walk(rel, options.recursive, options.signal, true);
  }

  async stat(path: string, options: { signal?: AbortSignal } = {}): Promise<Entry | null> {
    const rel = relativePath(path);
    return this.run(options.signal, 'stat', rel, async (client) => {
      const found = await this.describe(client, rel, options.signal);
      if (!found) return null;
      return found.directory
        ? { path: rel, kind: 'directory', size: 0, modifiedAt: found.modifiedAt }
        : { path: rel, kind: 'file', size: found.size, modifiedAt: found.modifiedAt };
    });
  }

  async read(path: string, options: { start?: number; end?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    const rel = relativePath(path);
    const { signal } = options;
    const fail = (err: unknown) => (signal?.aborted ? abortedError('read', rel, signal) : smbError(err, rel, 'read'));
    const opened = await this.run(signal, 'read', rel, async (client) => {
      const handle = await client.create(this.remote(rel), { access: Access.READ_DATA | READ_ATTRS, disposition: Disposition.OPEN, options: CreateOption.NON_DIRECTORY_FILE, share: Share.READ | Share.WRITE, signal });
      return { client, handle };
    });
    const { client, handle } = opened;
    const start = options.start ?? 0;
    const end = Math.min(options.end ?? Infinity, handle.size - 1);
    if (start > end) {
      void client.closeQuietly(handle.fileId);
      return Readable.from([]);
    }
    return readStream(client, handle.fileId, { start, end }, { depth: this.tuning.readDepth, chunk: client.maxRead, signal, fail });
  }

  async write(path: string, body: Readable, options: WriteOptions = {}): Promise<WriteResult> {
    const rel = relativePath(path);
    const { signal } = options;
    if (rel === '') throw new ConnectorError('CONFLICT', 'write: the base path is a directory, not a file');
    let opened: { client: SmbClient; handle: SmbHandle } | undefined;
    const cleanup = async () => {
      if (opened) await this.discard(opened.client, opened.handle, rel);
    };
    return guardWrite(body, { signal, aborted: () => abortedError('write', rel, signal!), mapError: (err) => smbError(err, rel, 'write'), cleanup }, async () => {
      opened = await this.run(signal, 'write', rel, (client) => this.openForWrite(client, rel, signal));
      const { client, handle } = opened;
      const sent = await writeBody(client, handle.fileId, body, { depth: this.tuning.writeDepth, chunk: client.maxWrite, signal });
      // Durable on the server's disk before the engine renames the temporary name into place.
      await client.flush(handle.fileId, signal);
      // After the last WRITE, on the handle that wrote (it holds WRITE_ATTRIBUTES); a rename keeps it.
      if (options.modifiedAt) await client.setModifiedAt(handle.fileId, options.modifiedAt, signal);
      opened = undefined;
      const stored = await client.close(handle.fileId, true, signal);
      if (stored !== sent) {
        await this.remove(rel).catch(() => undefined);
        throw new ConnectorError('TRANSIENT', `write ${rel}: the server stored ${stored} bytes of the ${sent} sent`);
      }
      return { size: sent };
    });
  }

  async mkdir(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    await this.run(options.signal, 'mkdir', rel, (client) => this.mkdirs(client, rel, options.signal));
  }

  async remove(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('PERMISSION', "remove: refusing to remove the connection's base path");
    await this.run(options.signal, 'remove', rel, (client) => this.removeTree(client, rel, options.signal));
  }

  async rename(from: string, to: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const relFrom = relativePath(from);
    const relTo = relativePath(to);
    if (relFrom === '' || relTo === '') throw new ConnectorError('PERMISSION', "rename: the connection's base path cannot be renamed or replaced");
    const { signal } = options;
    await this.run(signal, 'rename', relFrom, async (client) => {
      const source = await client.create(this.remote(relFrom), { access: Access.DELETE | READ_ATTRS, disposition: Disposition.OPEN, share: Share.ALL, signal });
      try {
        try {
          await client.rename(source.fileId, this.remote(relTo), signal);
        } catch (err) {
          if (!(err instanceof SmbStatusError)) throw err;
          const target = await this.describe(client, relTo, signal);
          if (target?.directory) throw new ConnectorError('CONFLICT', `rename ${relFrom}: a directory is in the way at ${relTo}`, { cause: err });
          if (target || !MISSING.includes(err.status)) throw err;
          await this.mkdirs(client, parentOf(relTo), signal);
          await client.rename(source.fileId, this.remote(relTo), signal);
        }
      } finally {
        await client.closeQuietly(source.fileId);
      }
    });
  }

  async test(options: { signal?: AbortSignal } = {}): Promise<string> {
    const { where, basePath, share } = this.endpoint;
    const { found, client } = await this.run(options.signal, 'test', '', async (c) => ({ found: await this.describe(c, '', options.signal), client: c }));
    if (!found) throw new ConnectorError('NOT_FOUND', `connected to ${where}, share ${share}, but the base path ${basePath} does not exist`);
    if (!found.directory) throw new ConnectorError('CONFLICT', `connected to ${where}, but the base path ${basePath} is not a directory`);
    return `Connected to ${where} (${dialectName(client.dialect)}, signed${client.signingRequired ? ', as the server requires' : ''}); ${basePath} is a directory`;
  }

  async close(): Promise<void> {
    this.session.close();
  }

  /** Backslash path inside the share of a checked relative path. */
  private remote(rel: string): string {
    return [this.endpoint.baseDir, ...rel.split('/')].filter(Boolean).join('\\');
  }

  /**
   * Runs `fn` on the session's client, mapping its errors for `op` on `rel`. A connection that
   * dropped while idle (server restart, idle timeout) fails the first request: once, on a new one.
   */
  private async run<T>(signal: AbortSignal | undefined, op: string, rel: string, fn: (client: SmbClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      const { client, fresh } = await this.session.get(signal);
      try {
        return await fn(client);
      } catch (err) {
        if (!fresh && attempt === 1 && err instanceof SmbConnectionError && !signal?.aborted) continue;
        if (signal?.aborted) throw abortedError(op, rel, signal);
        throw smbError(err, rel, op);
      }
    }
  }

  /** What CREATE says about `rel` (opened for attributes only, closed at once), or null when nothing is there. */
  private async describe(client: SmbClient, rel: string, signal?: AbortSignal): Promise<SmbHandle | null> {
    try {
      const handle = await client.create(this.remote(rel), { access: READ_ATTRS, disposition: Disposition.OPEN, share: Share.ALL, signal });
      await client.closeQuietly(handle.fileId);
      return handle;
    } catch (err) {
      if (err instanceof SmbStatusError && MISSING.includes(err.status)) return null;
      throw err;
    }
  }

  /** All entries of one directory (every QUERY_DIRECTORY page), then the handle is closed. */
  private async entries(client: SmbClient, rel: string, signal: AbortSignal | undefined, top: boolean): Promise<DirectoryEntry[]> {
    let dir: SmbHandle;
    try {
      dir = await client.create(this.remote(rel), { access: Access.LIST_DIRECTORY | READ_ATTRS, disposition: Disposition.OPEN, options: CreateOption.DIRECTORY_FILE, share: Share.ALL, signal });
    } catch (err) {
      if (err instanceof SmbStatusError && err.status === Status.NOT_A_DIRECTORY && top) throw new ConnectorError('CONFLICT', `list ${shownPath(rel)}: is a file, not a directory`, { cause: err });
      if (err instanceof SmbStatusError && err.status === Status.NOT_A_DIRECTORY) return [];
      throw err;
    }
    try {
      const out: DirectoryEntry[] = [];
      for (let first = true; ; first = false) {
        const page = await client.queryDirectory(dir.fileId, first, signal);
        if (!page) break;
        out.push(...page);
      }
      return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    } finally {
      await client.closeQuietly(dir.fileId);
    }
  }

  /** Depth-first: one directory's entries, each subdirectory's right after it; one listing in memory per level. */
  private async *walk(rel: string, recursive: boolean, signal: AbortSignal | undefined, top: boolean): AsyncGenerator<Entry> {
    const entries = await this.run(signal, 'list', rel, (client) => this.entries(client, rel, signal, top));
    for (const e of entries) {
      const path = joinRel(rel, e.name);
      yield e.directory ? { path, kind: 'directory', size: 0, modifiedAt: e.modifiedAt } : { path, kind: 'file', size: e.size, modifiedAt: e.modifiedAt };
      if (recursive && e.directory) yield* this.walk(path, true, signal, false);
    }
  }

  /** Opens `rel` for writing, truncated; creates missing parents once when the server says a path component is missing. */
  private async openForWrite(client: SmbClient, rel: string, signal?: AbortSignal): Promise<{ client: SmbClient; handle: SmbHandle }> {
    const open = () => client.create(this.remote(rel), {
      access: Access.WRITE_DATA | Access.APPEND_DATA | Access.WRITE_ATTRIBUTES | Access.DELETE | READ_ATTRS,
      disposition: Disposition.OVERWRITE_IF,
      options: CreateOption.NON_DIRECTORY_FILE,
      attributes: FileAttribute.NORMAL,
      share: Share.READ,
      signal,
    });
    try {
      return { client, handle: await open() };
    } catch (err) {
      if (!(err instanceof SmbStatusError) || err.status !== Status.OBJECT_PATH_NOT_FOUND) throw err;
      await this.mkdirs(client, parentOf(rel), signal);
      return { client, handle: await open() };
    }
  }

  /** After a failed write: marks the partial file for deletion on our handle and closes it; over a new connection if this one is gone. */
  private async discard(client: SmbClient, handle: SmbHandle, rel: string): Promise<void> {
    try {
      if (client.closed) throw new Error('connection lost');
      await client.deleteOnClose(handle.fileId);
      await client.close(handle.fileId);
    } catch {
      await this.remove(rel).catch(() => undefined);
    }
  }

  /** mkdir -p of `rel`: parents first only when the directory cannot be made directly. */
  private async mkdirs(client: SmbClient, rel: string, signal?: AbortSignal): Promise<void> {
    const create = async () => {
      const handle = await client.create(this.remote(rel), { access: READ_ATTRS, disposition: Disposition.CREATE, options: CreateOption.DIRECTORY_FILE, attributes: FileAttribute.DIRECTORY, share: Share.ALL, signal });
      await client.closeQuietly(handle.fileId);
    };
    try {
      if (rel === '') throw new SmbStatusError(Status.OBJECT_NAME_COLLISION, 0);
      await create();
    } catch (err) {
      if (!(err instanceof SmbStatusError)) throw err;
      if (err.status === Status.OBJECT_NAME_COLLISION) {
        const there = await this.describe(client, rel, signal);
        if (there?.directory) return;
        if (there) throw new ConnectorError('CONFLICT', `mkdir ${shownPath(rel)}: a file is in the way`, { cause: err });
        if (rel === '') throw new ConnectorError('NOT_FOUND', `mkdir: the base path ${this.endpoint.basePath} does not exist`, { cause: err });
      } else if (!MISSING.includes(err.status) || rel === '') throw err;
      await this.mkdirs(client, parentOf(rel), signal);
      try {
        await create();
      } catch (again) {
        const there = await this.describe(client, rel, signal);
        if (there && !there.directory) throw new ConnectorError('CONFLICT', `mkdir ${shownPath(rel)}: a file is in the way`, { cause: again });
        if (!there) throw again;
      }
    }
  }

  /** Deletes `rel` and, for a directory, everything below it first; nothing there is success. */
  private async removeTree(client: SmbClient, rel: string, signal?: AbortSignal): Promise<void> {
    let target: SmbHandle;
    const open = () => client.create(this.remote(rel), { access: Access.DELETE | READ_ATTRS, disposition: Disposition.OPEN, share: Share.ALL, signal });
    try {
      target = await open();
    } catch (err) {
      if (err instanceof SmbStatusError && MISSING.includes(err.status)) return;
      throw err;
    }
    if (target.directory) {
      await client.closeQuietly(target.fileId);
      for (const child of await this.entries(client, rel, signal, false)) {
        signal?.throwIfAborted();
        await this.removeTree(client, joinRel(rel, child.name), signal);
      }
      try {
        target = await open();
      } catch (err) {
        if (err instanceof SmbStatusError && MISSING.includes(err.status)) return;
        throw err;
      }
    }
    try {
      await client.deleteOnClose(target.fileId, signal);
    } finally {
      await client.closeQuietly(target.fileId);
    }
  }
}



/** The registry's factory for `smb` connections. */
export function createSmbConnector(settings: ConnectionSettings, context?: ConnectorContext): Connector {
  return new SmbConnector(settings, {}, context?.access);
}


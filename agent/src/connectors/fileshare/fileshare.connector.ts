import { Readable } from 'node:stream';
import type { ShareDirectoryClient, ShareFileClient } from '@azure/storage-file-share';
import type { ConnectionSettings } from '@xfer/shared';
import { baseName, joinRel, parentOf, relativePath } from '../paths.js';
import { closedAccess, type AgentAccess } from '../access.js';
import { ConnectorError, type Connector, type ConnectorCapabilities, type ConnectorContext, type Entry, type WriteOptions, type WriteResult } from '../types.js';
import { guardUpload } from '../upload-guard.js';
import { mapErrors } from '../map-errors.js';
import { md5Checksum } from '../azure/content-md5.js';
import { connectorReadStream } from '../azure/read-stream.js';
import { errorName } from '../azure/azure.errors.js';
import { DEFAULT_FILESHARE_TUNING, fileshareTarget, type FileshareTarget, type FileshareTuning } from './fileshare.config.js';
import { fileshareError } from './fileshare.errors.js';
import { uploadFile } from './fileshare.upload.js';

/**
 * Azure Files (the File service of Azure Storage) through its REST API. The connection's path is
 * `/<share>[/<directory>]`. Real directories exist, and Rename File replaces a target: the engine
 * writes to a temporary name and renames (atomic visibility), since a file under Azure Files is
 * created with its size and filled range by range, readable all the while.
 */
export class FileshareConnector implements Connector {
  readonly type = 'fileshare' as const;
  readonly capabilities: ConnectorCapabilities = { rename: true, directories: true, verifiesWrites: true, modTime: 'set', modTimePrecision: 1, parallelReads: true };
  private readonly target: FileshareTarget;
  private readonly tuning: FileshareTuning;

  constructor(settings: ConnectionSettings, tuning: Partial<FileshareTuning> = {}, access: AgentAccess = closedAccess()) {
    this.tuning = { ...DEFAULT_FILESHARE_TUNING, ...tuning };
    this.target = fileshareTarget(settings, this.tuning, access.network);
  }

  /**
   * List Directories and Files, one directory at a time, one page (`listPage` entries) per
   * directory level in memory; recursive: depth-first, each directory before its contents.
   */
  async *list(path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
    const rel = relativePath(path);
    yield* this.listDir(rel, options.recursive, options.signal);
  }

  private async *listDir(rel: string, recursive: boolean, signal: AbortSignal | undefined): AsyncGenerator<Entry> {
    const pages = this.dir(rel).listFilesAndDirectories({ includeTimestamps: true, abortSignal: signal }).byPage({ maxPageSize: this.tuning.listPage });
    const iterator = pages[Symbol.asyncIterator]();
    try {
      for (;;) {
        const step = await this.call('list', rel, () => iterator.next());
        if (step.done) break;
        const { directoryItems, fileItems } = step.value.segment;
        const entries: Entry[] = [];
        for (const d of directoryItems) {
          const p = this.childPath(rel, d.name);
          if (p !== null) entries.push({ path: p, kind: 'directory', size: 0, modifiedAt: d.properties?.lastModified });
        }
        for (const f of fileItems) {
          const p = this.childPath(rel, f.name);
          // The file's last write time (the SMB one, which a write keeps), not the REST Last-Modified.
          if (p !== null) entries.push({ path: p, kind: 'file', size: f.properties.contentLength, modifiedAt: f.properties.lastWriteTime ?? f.properties.lastModified });
        }
        entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
        for (const entry of entries) {
          yield entry;
          if (recursive && entry.kind === 'directory') yield* this.listDir(entry.path, true, signal);
        }
      }
    } finally {
      await iterator.return?.();
    }
  }

  /** Get File Properties; when there is no file, Get Directory Properties. */
  async stat(path: string, options: { signal?: AbortSignal } = {}): Promise<Entry | null> {
    const rel = relativePath(path);
    const { signal } = options;
    if (rel !== '') {
      try {
        const props = await this.call('stat', rel, () => this.file(rel).getProperties({ abortSignal: signal }));
        return { path: rel, kind: 'file', size: props.contentLength ?? 0, modifiedAt: props.fileLastWriteOn ?? props.lastModified, checksum: md5Checksum(props.contentMD5) };
      } catch (err) {
        // A directory there answers "not found" or "type mismatch" to a file operation.
        if (!(err instanceof ConnectorError && (err.code === 'NOT_FOUND' || err.code === 'CONFLICT'))) throw err;
      }
    }
    try {
      const props = await this.call('stat', rel, () => this.dir(rel).getProperties({ abortSignal: signal }));
      return { path: rel, kind: 'directory', size: 0, modifiedAt: props.lastModified };
    } catch (err) {
      if (err instanceof ConnectorError && (err.code === 'NOT_FOUND' || (err.code === 'CONFLICT' && rel !== ''))) return null;
      throw err;
    }
  }

  /** Get File with a byte range; a range that starts past the end reads nothing. */
  async read(path: string, options: { start?: number; end?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('CONFLICT', 'read /: the base path is a directory');
    const { start = 0, end, signal } = options;
    const count = end === undefined ? undefined : end - start + 1;
    if (count !== undefined && count <= 0) return Readable.from([]);
    let body: NodeJS.ReadableStream | undefined;
    try {
      // No re-download inside the SDK: a broken stream errors, and the engine retries the file.
      body = (await this.file(rel).download(start, count, { abortSignal: signal, maxRetryRequests: 0 })).readableStreamBody;
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 416) return Readable.from([]);
      throw fileshareError(err, this.context('read', rel));
    }
    if (!body) return Readable.from([]);
    return connectorReadStream(body as Readable, rel, (err) => fileshareError(err, this.context('read', rel)), signal);
  }

  /**
   * Create File, Put Range (several in flight, each with Content-MD5), the file's Content-MD5 at
   * the end (fileshare.upload.ts). On a failure or abort the file is deleted before the write rejects.
   */
  async write(path: string, body: Readable, options: WriteOptions = {}): Promise<WriteResult> {
    const rel = relativePath(path);
    const { signal } = options;
    const file = rel === '' ? null : this.file(rel);
    return guardUpload(rel, body, {
      signal, what: 'a file', mapError: (err) => fileshareError(err, this.context('write', rel)),
      // Whatever was created goes (the engine writes to temporary names: nothing of the user's is there).
      cleanup: () => file!.deleteIfExists(),
    }, () => uploadFile(file!, body, { ...options, makeParents: () => this.mkdir(parentOf(rel), { signal }) }, this.tuning));
  }

  /** Create Directory, its missing parents first; an existing directory is fine, a file in the way CONFLICT. */
  async mkdir(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') return;
    const { signal } = options;
    try {
      await this.dir(rel).create({ abortSignal: signal });
    } catch (err) {
      const name = errorName(err as object);
      if (name === 'ParentNotFound') {
        await this.mkdir(parentOf(rel), options);
        return this.mkdir(rel, options);
      }
      if (name !== 'ResourceAlreadyExists') throw fileshareError(err, this.context('mkdir', rel));
      const there = await this.stat(rel, options);
      if (there?.kind !== 'directory') throw new ConnectorError('CONFLICT', `mkdir ${rel}: a file is in the way`, { cause: err });
    }
  }

  /** Delete File, or a directory tree: files first (`deleteParallel` at a time), then each directory, deepest first. */
  async remove(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('PERMISSION', "remove /: refusing to remove the connection's base path");
    const { signal } = options;
    try {
      await this.call('remove', rel, () => this.file(rel).delete({ abortSignal: signal }));
      return;
    } catch (err) {
      if (!(err instanceof ConnectorError && (err.code === 'NOT_FOUND' || err.code === 'CONFLICT'))) throw err;
    }
    await this.removeTree(rel, signal);
  }

  private async removeTree(rel: string, signal: AbortSignal | undefined): Promise<void> {
    const pages = this.dir(rel).listFilesAndDirectories({ abortSignal: signal }).byPage({ maxPageSize: this.tuning.listPage });
    const iterator = pages[Symbol.asyncIterator]();
    try {
      for (;;) {
        let step;
        try {
          step = await this.call('remove', rel, () => iterator.next());
        } catch (err) {
          if (err instanceof ConnectorError && err.code === 'NOT_FOUND') return;
          throw err;
        }
        if (step.done) break;
        const { directoryItems, fileItems } = step.value.segment;
        const files = fileItems.map((f) => joinRel(rel, f.name));
        for (let i = 0; i < files.length; i += this.tuning.deleteParallel) {
          await Promise.all(files.slice(i, i + this.tuning.deleteParallel).map((f) => this.call('remove', f, () => this.file(f).deleteIfExists({ abortSignal: signal }))));
        }
        for (const d of directoryItems) await this.removeTree(joinRel(rel, d.name), signal);
      }
    } finally {
      await iterator.return?.();
    }
    await this.call('remove', rel, () => this.dir(rel).deleteIfExists({ abortSignal: signal }));
  }

  /** Rename File, replacing `to` (x-ms-file-rename-replace-if-exists); missing parents of `to` are created. */
  async rename(from: string, to: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const src = relativePath(from);
    const dst = relativePath(to);
    if (src === '' || dst === '') throw new ConnectorError('CONFLICT', 'rename: the base path cannot be renamed or replaced');
    const { signal } = options;
    const rename = () => this.file(src).rename(this.sharePath(dst), { replaceIfExists: true, abortSignal: signal });
    try {
      await rename();
    } catch (err) {
      if (errorName(err as object) !== 'ParentNotFound' || (await this.stat(src, options))?.kind !== 'file') throw fileshareError(err, this.context('rename', src));
      await this.mkdir(parentOf(dst), options);
      await this.call('rename', src, rename);
    }
  }

  /** Get Directory Properties of the base path: endpoint, credentials, share and directory in one request. */
  async test(options: { signal?: AbortSignal } = {}): Promise<string> {
    const { share, base, where } = this.target;
    try {
      await this.call('test', '', () => this.dir('').getProperties({ abortSignal: options.signal }));
    } catch (err) {
      if (err instanceof ConnectorError && err.code === 'NOT_FOUND' && base !== '' && !/share .* does not exist/.test(err.message)) {
        throw new ConnectorError('NOT_FOUND', `test /: directory ${base} does not exist in share ${share} at ${where}`, { cause: err });
      }
      throw err;
    }
    return base === '' ? `share ${share} at ${where} is reachable` : `share ${share} at ${where} is reachable; directory ${base} exists`;
  }

  async close(): Promise<void> {
    // The SDK's HTTP agent keeps no session state to end: sockets close when idle.
  }

  /** Path of a checked relative path inside the share ('' for the share's root). */
  private sharePath(rel: string): string {
    return joinRel(this.target.base, rel);
  }

  private dir(rel: string): ShareDirectoryClient {
    const p = this.sharePath(rel);
    return p === '' ? this.target.client.rootDirectoryClient : this.target.client.getDirectoryClient(p);
  }

  private file(rel: string): ShareFileClient {
    return this.target.client.rootDirectoryClient.getFileClient(this.sharePath(rel));
  }

  /** Connector path of an entry named `name` in `rel`, or null when no valid path names it. */
  private childPath(rel: string, name: string): string | null {
    const p = joinRel(rel, name);
    try {
      return relativePath(p) === p && baseName(p) === name ? p : null;
    } catch {
      return null;
    }
  }

  private context(op: string, path: string) {
    return { op, path, share: this.target.share, where: this.target.where };
  }

  /** Runs one SDK call, mapping any error it throws for `op` on `rel`. */
  private call<T>(op: string, rel: string, fn: () => Promise<T>): Promise<T> {
    return mapErrors(fn, (err) => fileshareError(err, this.context(op, rel)));
  }
}


/** The registry's factory for `fileshare` connections. */
export function createFileshareConnector(settings: ConnectionSettings, context?: ConnectorContext): Connector {
  return new FileshareConnector(settings, {}, context?.access);
}

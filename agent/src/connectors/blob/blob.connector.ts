import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { BlobItem, BlobPrefix, ContainerClient } from '@azure/storage-blob';
import type { ConnectionSettings } from '@xfer/shared';
import { relativePath } from '../paths.js';
import { mapErrors } from '../map-errors.js';
import { md5Checksum } from '../azure/content-md5.js';
import { closedAccess, type AgentAccess } from '../access.js';
import { ConnectorError, type Connector, type ConnectorCapabilities, type ConnectorContext, type Entry, type ServerCopyOptions, type WriteOptions, type WriteResult } from '../types.js';
import { keptMtime } from '../mtime-metadata.js';
import { guardUpload } from '../upload-guard.js';
import { DEFAULT_BLOB_TUNING, blobTarget, type BlobTarget, type BlobTuning } from './blob.config.js';
import { blobError } from './blob.errors.js';
import { connectorReadStream } from '../azure/read-stream.js';
import { uploadBlob, type UploadWithMd5 } from './blob.upload.js';
import { copyBlob, sameAccount } from './blob.copy.js';

const EMPTY_MD5 = createHash('md5').update(Buffer.alloc(0)).digest();
const PAGE = 1000;

/**
 * Azure Blob Storage (block blobs). Blob names are `<prefix>/<path>` in the container of the
 * connection's path. There is no rename and there are no real directories: a write is atomic
 * instead (one Put Blob, or blocks committed by Put Block List at the end), and `mkdir` leaves a
 * zero-byte `dir/` marker, as the S3 connector does.
 */
export class BlobConnector implements Connector {
  readonly type = 'blob' as const;
  readonly capabilities: ConnectorCapabilities = { rename: false, directories: false, verifiesWrites: true, modTime: 'metadata', modTimePrecision: 1, parallelReads: true };
  private readonly target: BlobTarget;
  private readonly container: ContainerClient;
  private readonly tuning: BlobTuning;

  constructor(settings: ConnectionSettings, tuning: Partial<BlobTuning> = {}, access: AgentAccess = closedAccess()) {
    this.tuning = { ...DEFAULT_BLOB_TUNING, ...tuning };
    this.target = blobTarget(settings, this.tuning, access.network);
    this.container = this.target.service.getContainerClient(this.target.container);
  }

  /**
   * List Blobs, one page of at most 1,000 names in memory at a time. Recursive: every blob under
   * the prefix, plus `dir/` markers as directories (name order, which is depth-first with a
   * directory's marker before its contents). Flat: the blobs and the prefixes (as directories,
   * marker or not) of one level. Names no connector path can name are skipped.
   */
  async *list(path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
    const rel = relativePath(path);
    const prefix = this.dirPrefix(rel);
    const { signal } = options;
    const pages = options.recursive
      // include=metadata: the kept `mtime` comes with the listing (no stat per blob).
      ? this.container.listBlobsFlat({ prefix, abortSignal: signal, includeMetadata: true }).byPage({ maxPageSize: PAGE })
      : this.container.listBlobsByHierarchy('/', { prefix, abortSignal: signal, includeMetadata: true }).byPage({ maxPageSize: PAGE });
    const iterator = pages[Symbol.asyncIterator]();
    try {
      for (;;) {
        const step = await this.call('list', rel, () => iterator.next());
        if (step.done) break;
        const segment = step.value.segment as { blobItems: BlobItem[]; blobPrefixes?: BlobPrefix[] };
        const entries: { name: string; entry: Entry }[] = [];
        for (const item of segment.blobItems) {
          if (item.name === prefix) continue;
          const isMarker = item.name.endsWith('/');
          const size = item.properties.contentLength ?? 0;
          if (isMarker && size > 0) continue;
          const entryPath = this.relOf(isMarker ? item.name.slice(0, -1) : item.name);
          if (entryPath === null) continue;
          entries.push({
            name: item.name,
            entry: isMarker
              ? { path: entryPath, kind: 'directory', size: 0, modifiedAt: item.properties.lastModified }
              : { path: entryPath, kind: 'file', size, modifiedAt: keptMtime(item.metadata) ?? item.properties.lastModified, checksum: md5Checksum(item.properties.contentMD5), ...(item.properties.etag ? { etag: item.properties.etag } : {}) },
          });
        }
        for (const p of segment.blobPrefixes ?? []) {
          const entryPath = this.relOf(p.name.slice(0, -1));
          if (entryPath !== null) entries.push({ name: p.name, entry: { path: entryPath, kind: 'directory', size: 0 } });
        }
        entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        for (const { entry } of entries) yield entry;
      }
    } finally {
      await iterator.return?.();
    }
  }

  async stat(path: string, options: { signal?: AbortSignal } = {}): Promise<Entry | null> {
    const rel = relativePath(path);
    const { signal } = options;
    if (rel !== '') {
      try {
        const props = await this.call('stat', rel, () => this.container.getBlobClient(this.name(rel)).getProperties({ abortSignal: signal }));
        return { path: rel, kind: 'file', size: props.contentLength ?? 0, modifiedAt: keptMtime(props.metadata) ?? props.lastModified, checksum: md5Checksum(props.contentMD5), ...(props.etag ? { etag: props.etag } : {}) };
      } catch (err) {
        if (!(err instanceof ConnectorError && err.code === 'NOT_FOUND')) throw err;
      }
    }
    // A "directory" is a prefix with something under it (its marker counts); the base always is one.
    try {
      const any = await this.firstName(this.dirPrefix(rel), 'stat', rel, signal);
      return rel === '' || any !== null ? { path: rel, kind: 'directory', size: 0 } : null;
    } catch (err) {
      if (err instanceof ConnectorError && err.code === 'NOT_FOUND') return null;
      throw err;
    }
  }

  /** Get Blob with a byte range; a range that starts past the end reads nothing. */
  async read(path: string, options: { start?: number; end?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('CONFLICT', 'read /: the base path is a directory');
    const { start = 0, end, signal } = options;
    const count = end === undefined ? undefined : end - start + 1;
    if (count !== undefined && count <= 0) return Readable.from([]);
    let body: NodeJS.ReadableStream | undefined;
    try {
      // No re-download inside the SDK: a broken stream errors, and the engine retries the file.
      const res = await this.container.getBlobClient(this.name(rel)).download(start, count, { abortSignal: signal, maxRetryRequests: 0 });
      body = res.readableStreamBody;
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 416) return Readable.from([]);
      throw blobError(err, this.context('read', rel));
    }
    if (!body) return Readable.from([]);
    return connectorReadStream(body as Readable, rel, (err) => blobError(err, this.context('read', rel)), signal);
  }

  async write(path: string, body: Readable, options: WriteOptions = {}): Promise<WriteResult> {
    const rel = relativePath(path);
    return guardUpload(rel, body, { signal: options.signal, what: 'a blob', mapError: (err) => blobError(err, this.context('write', rel)) }, () =>
      uploadBlob(this.container.getBlockBlobClient(this.name(rel)), body, options, this.tuning));
  }

  /**
   * Server-side copy from a blob connection to the same account with the same key (any containers
   * or prefixes): one Copy Blob From URL, checked against the listed Content-MD5 and ETag
   * (blob.copy.ts; docs/connectors.md "Server-side copies"). Null for anything else: another
   * account or key, a SAS connection on either side, a source without Content-MD5 or over 256 MiB.
   */
  async copyFrom(source: Connector, sourcePath: string, path: string, options: ServerCopyOptions): Promise<WriteResult | null> {
    if (!(source instanceof BlobConnector) || !sameAccount(this.target, source.target)) return null;
    const rel = relativePath(path);
    const from = source.container.getBlobClient(source.name(relativePath(sourcePath)));
    return this.call('copy', rel, () => copyBlob(this.container.getBlobClient(this.name(rel)), from, options.entry, options));
  }

  /** A zero-byte `path/` marker (the leaf only: parents are implied by the name). */
  async mkdir(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') return;
    const upload: UploadWithMd5 = { abortSignal: options.signal, transactionalContentMD5: EMPTY_MD5, blobHTTPHeaders: { blobContentMD5: EMPTY_MD5 } };
    await this.call('mkdir', rel, () => this.container.getBlockBlobClient(`${this.name(rel)}/`).upload(Buffer.alloc(0), 0, upload));
  }

  /** The blob at `path` and every blob under `path/` (markers and snapshots included), `deleteParallel` at a time. */
  async remove(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('PERMISSION', "remove /: refusing to remove the connection's base path");
    const { signal } = options;
    const del = (name: string) => this.call('remove', rel, () => this.container.getBlobClient(name).deleteIfExists({ abortSignal: signal, deleteSnapshots: 'include' }));
    await del(this.name(rel));
    const pages = this.container.listBlobsFlat({ prefix: this.dirPrefix(rel), abortSignal: signal }).byPage({ maxPageSize: PAGE });
    const iterator = pages[Symbol.asyncIterator]();
    try {
      for (;;) {
        const step = await this.call('remove', rel, () => iterator.next());
        if (step.done) break;
        const names = step.value.segment.blobItems.map((b) => b.name);
        for (let i = 0; i < names.length; i += this.tuning.deleteParallel) {
          await Promise.all(names.slice(i, i + this.tuning.deleteParallel).map(del));
        }
      }
    } finally {
      await iterator.return?.();
    }
  }

  async rename(from: string, to: string): Promise<void> {
    relativePath(from);
    relativePath(to);
    throw new ConnectorError('UNSUPPORTED', 'Azure Blob Storage has no rename; writes are atomic instead');
  }

  /** One List Blobs of at most one name: endpoint, credentials and container in one request. */
  async test(options: { signal?: AbortSignal } = {}): Promise<string> {
    const { container, prefix, where } = this.target;
    const any = await this.firstName(prefix === '' ? '' : `${prefix}/`, 'test', '', options.signal);
    if (prefix === '') return `container ${container} at ${where} is reachable`;
    return any === null
      ? `container ${container} at ${where} is reachable; prefix ${prefix}/ is empty so far (the first write creates the prefix)`
      : `container ${container} at ${where} is reachable; prefix ${prefix}/ holds blobs`;
  }

  async close(): Promise<void> {
    // The SDK's HTTP agent keeps no session state to end: sockets close when idle.
  }

  /** The first blob name under `prefix`, or null: one List Blobs request of one name. */
  private async firstName(prefix: string, op: string, rel: string, signal: AbortSignal | undefined): Promise<string | null> {
    const iterator = this.container.listBlobsFlat({ prefix, abortSignal: signal }).byPage({ maxPageSize: 1 })[Symbol.asyncIterator]();
    try {
      const step = await this.call(op, rel, () => iterator.next());
      return step.done ? null : (step.value.segment.blobItems[0]?.name ?? null);
    } finally {
      await iterator.return?.();
    }
  }

  /** Blob name of a checked relative path. */
  private name(rel: string): string {
    const { prefix } = this.target;
    return prefix === '' ? rel : rel === '' ? prefix : `${prefix}/${rel}`;
  }

  /** Name prefix of everything below `rel` ('' for the container root). */
  private dirPrefix(rel: string): string {
    const name = this.name(rel);
    return name === '' ? '' : `${name}/`;
  }

  /** Connector path of a blob name below the base prefix, or null when no valid path names it. */
  private relOf(name: string): string | null {
    const root = this.target.prefix === '' ? '' : `${this.target.prefix}/`;
    if (!name.startsWith(root)) return null;
    const rel = name.slice(root.length);
    if (rel === '') return null;
    try {
      return relativePath(rel) === rel ? rel : null;
    } catch {
      return null;
    }
  }

  private context(op: string, path: string) {
    return { op, path, container: this.target.container, where: this.target.where };
  }

  /** Runs one SDK call, mapping any error it throws for `op` on `rel`. */
  private call<T>(op: string, rel: string, fn: () => Promise<T>): Promise<T> {
    return mapErrors(fn, (err) => blobError(err, this.context(op, rel)));
  }
}


/** The registry's factory for `blob` connections. */
export function createBlobConnector(settings: ConnectionSettings, context?: ConnectorContext): Connector {
  return new BlobConnector(settings, {}, context?.access);
}

import { createHash } from 'node:crypto';
import { PassThrough, Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type ListObjectsV2CommandOutput,
} from '@aws-sdk/client-s3';
import type { ConnectionSettings } from '@xfer/shared';
import { relativePath } from '../paths.js';
import { mapErrors } from '../map-errors.js';
import { closedAccess, type AgentAccess } from '../access.js';
import { ConnectorError, type Connector, type ConnectorCapabilities, type ConnectorContext, type Entry, type OpenUpload, type ServerCopyOptions, type WriteOptions, type WriteResult } from '../types.js';
import type { KeptTimes } from '../kept-times.js';
import { keptMtime } from '../mtime-metadata.js';
import { guardUpload } from '../upload-guard.js';
import { DEFAULT_S3_TUNING, s3Target, type S3Target, type S3Tuning } from './s3.config.js';
import { s3Error } from './s3.errors.js';
import { copyInside, sameAccount } from './s3.copy.js';
import { DirectS3, header } from './s3.direct.js';
import { storeChecksum, uploadObject } from './s3.upload.js';

/** Listing passes of one remove before a marker that stays "not empty" fails it. */
const MAX_REMOVE_PASSES = 16;
const EMPTY_MD5 = createHash('md5').update(Buffer.alloc(0)).digest('base64');

/**
 * S3 and the stores that speak its API (types s3, r2, gcs; per-type endpoints and quirks in
 * s3.config.ts). Keys are `<prefix>/<path>` in the bucket of the connection's path. There is no
 * rename and there are no real directories: a write is atomic instead (one PUT, or a multipart
 * upload committed at the end), and `mkdir` leaves a zero-byte `dir/` marker.
 */
export class S3Connector implements Connector {
  readonly capabilities: ConnectorCapabilities = { rename: false, directories: false, verifiesWrites: true, modTime: 'metadata', modTimePrecision: 1, parallelReads: true };
  readonly type: S3Target['type'];
  private readonly target: S3Target;
  private readonly client: S3Client;
  private readonly direct: DirectS3;
  private readonly tuning: S3Tuning;
  /** The agent's index of kept times (kept-times.ts), and this bucket's name in it. */
  private readonly kept: { times: KeptTimes; store: string } | null;

  constructor(settings: ConnectionSettings, tuning: Partial<S3Tuning> = {}, access: AgentAccess = closedAccess(), keptTimes?: KeptTimes) {
    this.tuning = { ...DEFAULT_S3_TUNING, ...tuning };
    this.target = s3Target(settings, this.tuning, access.network);
    this.type = this.target.type;
    this.client = new S3Client(this.target.clientConfig);
    this.direct = new DirectS3(this.target, this.tuning);
    this.kept = keptTimes ? { times: keptTimes, store: `${this.type} ${this.target.where} ${this.target.bucket}` } : null;
  }

  /**
   * ListObjectsV2, one page of at most 1,000 keys in memory at a time. Recursive: every object
   * under the prefix, plus `dir/` markers as directories (key order, which is depth-first with a
   * directory's marker before its contents). Flat: the objects and the common prefixes (as
   * directories, marker or not) of one level. Keys that do not make a valid path (empty segments
   * as in `a//b`, `.` or `..` segments, backslashes) are skipped: no connector path names them.
   */
  async *list(path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
    const rel = relativePath(path);
    const prefix = this.dirPrefix(rel);
    let token: string | undefined;
    do {
      const page: ListObjectsV2CommandOutput = await this.call('list', rel, () => this.client.send(new ListObjectsV2Command({
        Bucket: this.target.bucket, Prefix: prefix, Delimiter: options.recursive ? undefined : '/', ContinuationToken: token, MaxKeys: 1000,
      }), { abortSignal: options.signal }));
      const entries: { key: string; entry: Entry }[] = [];
      for (const object of page.Contents ?? []) {
        const key = object.Key;
        if (!key || key === prefix) continue;
        const isMarker = key.endsWith('/');
        if (isMarker && (object.Size ?? 0) > 0) continue;
        const entryPath = this.relOf(isMarker ? key.slice(0, -1) : key);
        if (entryPath === null) continue;
        const size = object.Size ?? 0;
        // ListObjectsV2 carries no metadata: a kept `mtime` comes from the agent's index when it
        // knows this very object, else from stat (HEAD).
        const kept = object.ETag ? this.kept?.times.lookup(this.kept.store, key, { size, etag: object.ETag, lastModified: object.LastModified }) : undefined;
        entries.push({
          key,
          entry: isMarker
            ? { path: entryPath, kind: 'directory', size: 0, modifiedAt: object.LastModified }
            : {
              path: entryPath, kind: 'file', size, ...(kept ? { modifiedAt: kept } : { modifiedAt: object.LastModified, modifiedAtNeedsStat: true }),
              checksum: storeChecksum(undefined, object.ETag), ...(object.ETag ? { etag: object.ETag } : {}),
            },
        });
      }
      for (const common of page.CommonPrefixes ?? []) {
        const entryPath = common.Prefix ? this.relOf(common.Prefix.slice(0, -1)) : null;
        if (entryPath !== null) entries.push({ key: common.Prefix!, entry: { path: entryPath, kind: 'directory', size: 0 } });
      }
      entries.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      for (const { entry } of entries) yield entry;
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  async stat(path: string, options: { signal?: AbortSignal } = {}): Promise<Entry | null> {
    const rel = relativePath(path);
    if (rel !== '') {
      try {
        const key = this.key(rel);
        const head = await this.call('stat', rel, () => this.direct.head(this.target.bucket, key, { signal: options.signal, checksumMode: this.target.quirks.sha256 }));
        const size = Number(header(head, 'content-length') ?? 0);
        const etag = header(head, 'etag');
        const written = header(head, 'last-modified');
        const lastModified = written ? new Date(written) : undefined;
        const mtime = keptMtime(userMetadata(head));
        if (mtime && etag && lastModified && !Number.isNaN(lastModified.getTime())) this.kept?.times.record(this.kept.store, key, { size, etag, lastModified, mtime });
        return { path: rel, kind: 'file', size, modifiedAt: mtime ?? lastModified, checksum: storeChecksum(header(head, 'x-amz-checksum-sha256'), etag), ...(etag ? { etag } : {}) };
      } catch (err) {
        if (!(err instanceof ConnectorError && err.code === 'NOT_FOUND')) throw err;
      }
    }
    // A "directory" is a prefix with something under it (its marker counts); the base always is one.
    try {
      const page = await this.call('stat', rel, () => this.client.send(new ListObjectsV2Command({ Bucket: this.target.bucket, Prefix: this.dirPrefix(rel), MaxKeys: 1 }), { abortSignal: options.signal }));
      return rel === '' || (page.KeyCount ?? page.Contents?.length ?? 0) > 0 ? { path: rel, kind: 'directory', size: 0 } : null;
    } catch (err) {
      if (err instanceof ConnectorError && err.code === 'NOT_FOUND') return null;
      throw err;
    }
  }

  async read(path: string, options: { start?: number; end?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('CONFLICT', 'read /: the base path is a directory');
    const { start = 0, end, signal } = options;
    const range = start > 0 || end !== undefined ? `bytes=${start}-${end ?? ''}` : undefined;
    let res;
    try {
      res = await this.client.send(new GetObjectCommand({ Bucket: this.target.bucket, Key: this.key(rel), Range: range }), { abortSignal: signal });
    } catch (err) {
      // A range that starts past the end (an empty object, or start beyond the size): no bytes.
      if ((err as { name?: string }).name === 'InvalidRange') return Readable.from([]);
      throw s3Error(err, this.context('read', rel));
    }
    const body = res.Body as Readable | undefined;
    if (!body) return Readable.from([]);
    // A stream of our own, so that every error the reader sees is a ConnectorError.
    const out = new PassThrough({ highWaterMark: 1024 * 1024 });
    body.once('error', (err) => out.destroy(s3Error(err, this.context('read', rel))));
    out.once('close', () => body.destroy());
    if (signal) {
      // The SDK aborts the request too, but its error would read as a reset connection.
      const onAbort = () => out.destroy(new ConnectorError('TRANSIENT', `read ${rel}: aborted`, { cause: signal.reason }));
      signal.addEventListener('abort', onAbort, { once: true });
      out.once('close', () => signal.removeEventListener('abort', onAbort));
    }
    body.pipe(out);
    return out;
  }

  async write(path: string, body: Readable, options: WriteOptions = {}): Promise<WriteResult> {
    const rel = relativePath(path);
    const key = this.key(rel);
    const { etag, ...result } = await guardUpload(rel, body, { signal: options.signal, what: 'an object', mapError: (err) => s3Error(err, this.context('write', rel)) }, () =>
      uploadObject({ client: this.client, direct: this.direct, bucket: this.target.bucket, key, quirks: this.target.quirks, tuning: this.tuning }, body, options));
    this.written(key, result.size, etag, options.modifiedAt);
    return result;
  }

  /**
   * Server-side copy from an S3-family connection to the same store with the same credentials
   * (s3.copy.ts; docs/connectors.md "Server-side copies"): verified by the copy's ETag, which S3
   * computes from the bytes and which must be the listed source's.
   */
  async copyFrom(source: Connector, sourcePath: string, path: string, options: ServerCopyOptions): Promise<WriteResult | null> {
    if (!(source instanceof S3Connector) || !sameAccount(this.target, source.target) || options.entry.kind !== 'file') return null;
    const rel = relativePath(path);
    const key = this.key(rel);
    const copied = await this.call('copy', rel, () => copyInside({
      client: this.client, to: this.target, toKey: key, from: source.target, fromKey: source.key(relativePath(sourcePath)),
    }, options.entry, options));
    if (!copied) return null;
    this.written(key, copied.size, copied.etag, copied.modifiedAt);
    return { size: copied.size, storeVerified: 'server-copy-etag' };
  }

  /** A new object at `key`: the index of kept times learns its kept time, or forgets what it knew. */
  private written(key: string, size: number, etag: string | undefined, mtime: Date | undefined): void {
    if (!this.kept) return;
    if (etag && mtime) this.kept.times.record(this.kept.store, key, { size, etag, mtime });
    else this.kept.times.forget(this.kept.store, key);
  }

  async mkdir(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') return;
    await this.call('mkdir', rel, () => this.client.send(new PutObjectCommand({
      Bucket: this.target.bucket, Key: `${this.key(rel)}/`, Body: Buffer.alloc(0), ContentLength: 0, ContentMD5: EMPTY_MD5,
    }), { abortSignal: options.signal }));
  }

  /**
   * The object at `path` and every key under `path/` (markers included), in batches of 1,000.
   * A store over a file system (versitygw) refuses a `dir/` marker while keys below it remain,
   * which happens when they fall on a later page or a parallel batch: such keys are left for
   * another pass over what remains (one pass per level of nesting at most).
   */
  async remove(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('PERMISSION', "remove /: refusing to remove the connection's base path");
    const { signal } = options;
    const prefix = this.dirPrefix(rel);
    for (let pass = 1; ; pass++) {
      let notYet: ConnectorError | undefined;
      let token: string | undefined;
      do {
        const page: ListObjectsV2CommandOutput = await this.call('remove', rel, () => this.client.send(new ListObjectsV2Command({ Bucket: this.target.bucket, Prefix: prefix, ContinuationToken: token, MaxKeys: 1000 }), { abortSignal: signal }));
        const keys = (page.Contents ?? []).flatMap((o) => (o.Key ? [o.Key] : []));
        // Deepest first within a page: a directory's contents before its marker.
        keys.sort((a, b) => (a < b ? 1 : a > b ? -1 : 0));
        notYet = (await this.deleteKeys(rel, keys, signal)) ?? notYet;
        for (const key of keys) this.kept?.times.forget(this.kept.store, key);
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      if (!notYet) break;
      if (pass >= MAX_REMOVE_PASSES) throw notYet;
    }
    await this.call('remove', rel, () => this.client.send(new DeleteObjectCommand({ Bucket: this.target.bucket, Key: this.key(rel) }), { abortSignal: signal })).catch((err: unknown) => {
      if (!(err instanceof ConnectorError && err.code === 'NOT_FOUND')) throw err;
    });
    this.kept?.times.forget(this.kept.store, this.key(rel));
  }

  async rename(from: string, to: string): Promise<void> {
    relativePath(from);
    relativePath(to);
    throw new ConnectorError('UNSUPPORTED', `rename: ${this.type} has no rename (writes are atomic instead)`);
  }

  async test(options: { signal?: AbortSignal } = {}): Promise<string> {
    const { bucket, prefix, where } = this.target;
    const page = await this.call('test', '', () => this.client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: this.dirPrefix(''), MaxKeys: 1 }), { abortSignal: options.signal }));
    const contents = (page.KeyCount ?? page.Contents?.length ?? 0) > 0;
    const base = prefix === '' ? `bucket ${bucket}` : `bucket ${bucket}, prefix ${prefix}/`;
    const note = prefix === '' || contents ? 'is readable' : 'is empty so far (the first write creates the prefix)';
    return `Connected to ${where}; ${base} ${note}`;
  }

  async close(): Promise<void> {
    this.client.destroy();
    this.direct.close();
  }

  /** ListMultipartUploads below `path`, page by page (the keys a multipart upload targets are its final keys). */
  async *openUploads(path: string, options: { signal?: AbortSignal } = {}): AsyncIterable<OpenUpload> {
    const rel = relativePath(path);
    const prefix = this.dirPrefix(rel);
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    for (;;) {
      const page = await this.call('list uploads', rel, () => this.client.send(new ListMultipartUploadsCommand({
        Bucket: this.target.bucket, Prefix: prefix, KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker, MaxUploads: 1000,
      }), { abortSignal: options.signal }));
      for (const upload of page.Uploads ?? []) {
        const uploadPath = upload.Key ? this.relOf(upload.Key) : null;
        if (uploadPath !== null && upload.UploadId) yield { path: uploadPath, id: upload.UploadId, startedAt: upload.Initiated };
      }
      if (!page.IsTruncated || (!page.NextKeyMarker && !page.NextUploadIdMarker)) return;
      keyMarker = page.NextKeyMarker;
      uploadIdMarker = page.NextUploadIdMarker;
    }
  }

  async abortUpload(upload: OpenUpload, options: { signal?: AbortSignal } = {}): Promise<void> {
    const rel = relativePath(upload.path);
    await this.call('abort upload', rel, () => this.client.send(new AbortMultipartUploadCommand({
      Bucket: this.target.bucket, Key: this.key(rel), UploadId: upload.id,
    }), { abortSignal: options.signal })).catch((err: unknown) => {
      if (!(err instanceof ConnectorError && err.code === 'NOT_FOUND')) throw err;
    });
  }

  private key(rel: string): string {
    const { prefix } = this.target;
    return prefix === '' ? rel : rel === '' ? prefix : `${prefix}/${rel}`;
  }

  /** The key prefix of everything below `rel` ('' for the root of a bucket). */
  private dirPrefix(rel: string): string {
    const key = this.key(rel);
    return key === '' ? '' : `${key}/`;
  }

  /** The connector path of a key under the base prefix, or null when it is not a valid path. */
  private relOf(key: string): string | null {
    const root = this.dirPrefix('');
    if (!key.startsWith(root)) return null;
    const rel = key.slice(root.length);
    try {
      return relativePath(rel) === rel && rel !== '' ? rel : null;
    } catch {
      return null;
    }
  }

  /** Deletes `keys`; resolves with the error of a marker refused as not empty yet (see remove), if any. */
  private async deleteKeys(rel: string, keys: string[], signal: AbortSignal | undefined): Promise<ConnectorError | undefined> {
    if (keys.length === 0) return undefined;
    const { bucket } = this.target;
    let notYet: ConnectorError | undefined;
    const refused = (code: string | undefined, message: string | undefined) => {
      const err = s3Error({ name: code, message }, this.context('remove', rel));
      if (code === 'ErrDirectoryNotEmpty') notYet = err;
      else if (code !== 'NoSuchKey') throw err;
    };
    if (this.target.quirks.batchDelete) {
      const res = await this.call('remove', rel, () => this.client.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true } }), { abortSignal: signal }));
      for (const e of res.Errors ?? []) refused(e.Code, e.Message);
      return notYet;
    }
    for (let i = 0; i < keys.length; i += this.tuning.deleteParallel) {
      await Promise.all(keys.slice(i, i + this.tuning.deleteParallel).map(async (Key) => {
        try {
          await this.client.send(new DeleteObjectCommand({ Bucket: bucket, Key }), { abortSignal: signal });
        } catch (err) {
          const e = err as { name?: string; message?: string; $metadata?: unknown };
          if (!e.$metadata) throw s3Error(err, this.context('remove', rel));
          refused(e.name, e.message);
        }
      }));
    }
    return notYet;
  }

  private context(op: string, path: string) {
    return { op, path, bucket: this.target.bucket, where: this.target.where };
  }

  /** Runs one SDK call, mapping any error it throws for `op` on `rel`. */
  private call<T>(op: string, rel: string, fn: () => Promise<T>): Promise<T> {
    return mapErrors(fn, (err) => s3Error(err, this.context(op, rel)));
  }
}

/** The registry's factory for `s3`, `r2` and `gcs` connections. */
export function createS3Connector(settings: ConnectionSettings, context?: ConnectorContext): Connector {
  return new S3Connector(settings, {}, context?.access, context?.keptTimes);
}

/** The `x-amz-meta-*` headers of an answer, by their names without the prefix (as the SDK's `Metadata`). */
function userMetadata(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith('x-amz-meta-') && typeof value === 'string') out[name.slice('x-amz-meta-'.length)] = value;
  }
  return out;
}

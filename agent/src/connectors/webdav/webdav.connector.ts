import { Readable } from 'node:stream';
import type { ConnectionSettings } from '@xfer/shared';
import { joinRel, parentOf, relativePath } from '../paths.js';
import { closedAccess, type AgentAccess } from '../access.js';
import { ConnectorError, type Connector, type ConnectorCapabilities, type ConnectorContext, type Entry, type WriteOptions, type WriteResult } from '../types.js';
import { DavClient, type DavResource } from './webdav.client.js';
import { webdavConfig, type WebdavConfig } from './webdav.config.js';
import { requestError, type WebdavErrorContext } from './webdav.errors.js';
import { bodyChunks } from '../io/http-body.js';
import { SingleFlight } from '../single-flight.js';

/**
 * WebDAV (RFC 4918) over HTTP(S) with Basic auth. Listing is PROPFIND `Depth: 1`, one collection
 * at a time (never `Depth: infinity`, which servers refuse or answer with the whole tree in one
 * body); writes are one streamed PUT (chunked when the length is unknown); `rename` is MOVE with
 * `Overwrite: T`, so the engine writes a temporary name and renames it into place.
 */
export class WebdavConnector implements Connector {
  readonly type = 'webdav' as const;
  /**
   * `modTime` is learnt on the first write given a time (docs/connectors.md "Modification times"):
   * the PUT carries `X-OC-Mtime` (rclone's and ownCloud's way); a server that answers
   * `X-OC-Mtime: accepted`, or whose `getlastmodified` then shows that time, keeps it (`set`);
   * any other ignores it (Apache mod_dav: RFC 4918 makes getlastmodified a protected property,
   * so PROPPATCH cannot set it either) and the connector says `none` from then on.
   */
  readonly capabilities: ConnectorCapabilities = { rename: true, directories: true, modTime: 'set', modTimePrecision: 1000, parallelReads: true };
  /** Whether the server keeps X-OC-Mtime: unknown until the first write with a time shows it. */
  private ocMtime: boolean | undefined;
  private readonly config: WebdavConfig;
  private readonly dav: DavClient;
  /** mkdir chains in flight, by relative path. */
  private readonly creating = new SingleFlight<void>();

  constructor(settings: ConnectionSettings, access: AgentAccess = closedAccess()) {
    this.config = webdavConfig(settings);
    this.dav = new DavClient(this.config, access.network);
  }

  async *list(path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
    yield* this.walk(relativePath(path), options.recursive, options.signal, true);
  }

  /**
   * One collection's children (one PROPFIND `Depth: 1`); a child collection's subtree follows it
   * at once when recursive, so only the levels on the way down are in memory.
   */
  private async *walk(rel: string, recursive: boolean, signal: AbortSignal | undefined, top = false): AsyncIterable<Entry> {
    const own = this.serverPath(rel);
    const resources = await this.dav.propfind(own, 1, this.ctx('list', rel), signal);
    const self = resources?.find((r) => r.serverPath === own);
    if (top && !resources) throw new ConnectorError('NOT_FOUND', `list ${JSON.stringify(rel)} on ${this.config.endpoint}: no such directory`);
    if (top && self && !self.collection) throw new ConnectorError('CONFLICT', `list ${JSON.stringify(rel)} on ${this.config.endpoint}: not a directory`);
    // Gone since its parent was listed: nothing to list.
    if (!resources) return;
    for (const resource of resources) {
      if (resource.serverPath === own) continue;
      const child = this.childPath(resource, own, rel);
      if (child === null) continue;
      yield this.entry(child, resource);
      if (recursive && resource.collection) yield* this.walk(child, true, signal);
    }
  }

  async stat(path: string, options?: { signal?: AbortSignal }): Promise<Entry | null> {
    const rel = relativePath(path);
    const found = await this.dav.propfind(this.serverPath(rel), 0, this.ctx('stat', rel), options?.signal);
    return found?.[0] ? this.entry(rel, found[0]) : null;
  }

  async read(path: string, options: { start?: number; end?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    const rel = relativePath(path);
    const ctx = this.ctx('read', rel);
    const start = options.start ?? 0;
    const ranged = start > 0 || options.end !== undefined;
    if (options.end !== undefined && options.end < start) return Readable.from([]);
    const res = await this.dav.request({
      method: 'GET', serverPath: this.serverPath(rel), signal: options.signal, ctx, accept: [416],
      headers: ranged ? { Range: `bytes=${start}-${options.end ?? ''}` } : {},
    });
    // 416: the range starts past the end, so there is nothing to read.
    if (res.status === 416) {
      res.discard();
      return Readable.from([]);
    }
    // A server that ignores Range answers 200 with the whole file: cut the range out here.
    const skip = ranged && res.status === 200 ? start : 0;
    const limit = ranged && res.status === 200 && options.end !== undefined ? options.end - start + 1 : Infinity;
    return Readable.from(bodyChunks(res.body, { skip, limit, signal: options.signal, fail: (err) => requestError(err, ctx, options.signal) }), { objectMode: false });
  }

  async write(path: string, body: Readable, options: WriteOptions): Promise<WriteResult> {
    const rel = relativePath(path);
    const ctx = this.ctx('write', rel);
    if (rel === '') throw new ConnectorError('CONFLICT', 'write needs a file path, not the base path');
    if (options.signal?.aborted) {
      body.destroy();
      throw requestError(options.signal.reason, ctx, options.signal);
    }
    let size = 0;
    let sourceError: unknown;
    async function* counted(): AsyncIterable<Uint8Array> {
      try {
        for await (const chunk of body) {
          const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
          // An empty chunk would go out as the chunked encoding's terminator and end the body early.
          if (bytes.length === 0) continue;
          size += bytes.length;
          yield bytes;
        }
      } catch (err) {
        sourceError = err;
        throw err;
      }
    }
    // An abort must reach the source too: the request's pipeline destroys the generator above,
    // and on Node 24 that waits for the generator's pending read of `body`, which a stalled
    // source never answers (the conformance test's abort hung there for good).
    const onAbort = () => body.destroy(options.signal!.reason as Error);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    let sent = false;
    try {
      await this.mkdirs(parentOf(rel), options.signal);
      sent = true;
      const keep = options.modifiedAt && this.ocMtime !== false ? options.modifiedAt : undefined;
      const res = await this.dav.request({
        method: 'PUT', serverPath: this.serverPath(rel), signal: options.signal, ctx, body: Readable.from(counted()),
        // Whole seconds since the epoch, as rclone's webdav backend sends it.
        headers: { 'Content-Type': 'application/octet-stream', ...(keep ? { 'X-OC-Mtime': String(Math.floor(keep.getTime() / 1000)) } : {}) },
      });
      const accepted = String(res.body.headers['x-oc-mtime'] ?? '').toLowerCase() === 'accepted';
      res.discard();
      if (keep && this.ocMtime === undefined) await this.learnOcMtime(rel, keep, accepted, options.signal);
      return { size };
    } catch (err) {
      body.destroy();
      const mapped = sourceError !== undefined && !options.signal?.aborted
        ? new ConnectorError('TRANSIENT', `write ${JSON.stringify(rel)}: reading the source failed: ${(sourceError as Error)?.message ?? sourceError}`, { cause: sourceError })
        : requestError(err, ctx, options.signal);
      // Bytes may have landed at the path: remove them (without the caller's signal, which may
      // be the reason we are here). A refused PUT created nothing.
      if (sent && mapped.code !== 'AUTH' && mapped.code !== 'PERMISSION') await this.removeCutUpload(rel);
      throw mapped;
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
    }
  }

  /**
   * After the first PUT with X-OC-Mtime: kept when the server says `accepted` (ownCloud, Nextcloud)
   * or when the file's getlastmodified (whole seconds) is that time (rclone serve webdav sets it
   * without saying so); otherwise the server ignores the header.
   */
  private async learnOcMtime(rel: string, time: Date, accepted: boolean, signal: AbortSignal | undefined): Promise<void> {
    let kept = accepted;
    if (!kept) {
      // The file is written: a failed look leaves the question open for the next write.
      const stat = await this.stat(rel, { signal }).catch(() => undefined);
      if (stat === undefined) return;
      kept = stat?.modifiedAt?.getTime() === Math.floor(time.getTime() / 1000) * 1000;
    }
    this.ocMtime = kept;
    if (!kept) this.capabilities.modTime = 'none';
  }

  async mkdir(path: string, options?: { signal?: AbortSignal }): Promise<void> {
    await this.mkdirs(relativePath(path), options?.signal);
  }

  /**
   * MKCOL `rel`; on 409 (a parent is missing) its parent first, one level at a time, then again.
   * 405 (or 423: another request is creating it) means something is there: fine when it is a
   * collection, CONFLICT otherwise. Concurrent calls for one path share one request chain
   * (parallel writes into one new directory), so the map holds only what is in flight.
   */
  private mkdirs(rel: string, signal?: AbortSignal): Promise<void> {
    if (rel === '') return Promise.resolve();
    return this.creating.run(rel, () => this.mkcol(rel, signal));
  }

  private async mkcol(rel: string, signal?: AbortSignal): Promise<void> {
    const ctx = this.ctx('mkdir', rel);
    const mkcol = async () => {
      const res = await this.dav.request({ method: 'MKCOL', serverPath: this.serverPath(rel), collection: true, signal, ctx, accept: [405, 409, 423] });
      res.discard();
      return res.status;
    };
    let status = await mkcol();
    if (status === 409) {
      await this.mkdirs(parentOf(rel), signal);
      status = await mkcol();
    }
    if (status === 405 || status === 423) {
      const found = await this.dav.propfind(this.serverPath(rel), 0, ctx, signal);
      if (found?.[0]?.collection) return;
      if (found?.[0]) throw new ConnectorError('CONFLICT', `mkdir ${JSON.stringify(rel)} on ${this.config.endpoint}: a file is in the way`);
      throw new ConnectorError(status === 423 ? 'TRANSIENT' : 'CONFLICT', `mkdir ${JSON.stringify(rel)} on ${this.config.endpoint}: the server refused it (HTTP ${status})`);
    }
    if (status === 409) throw new ConnectorError('CONFLICT', `mkdir ${JSON.stringify(rel)} on ${this.config.endpoint}: a parent is not a directory`);
  }

  async remove(path: string, options?: { signal?: AbortSignal }): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('PERMISSION', 'refusing to remove the connection\'s base path');
    // DELETE of a collection removes everything below it (RFC 4918 9.6.1): one request.
    const res = await this.dav.request({ method: 'DELETE', serverPath: this.serverPath(rel), signal: options?.signal, ctx: this.ctx('remove', rel), accept: [404] });
    res.discard();
  }

  /**
   * Removes what a failed PUT left. Best effort: a failure here must not hide the write's own.
   * The server may still be handling the cut upload: while it has the file open it answers 423
   * Locked (rclone), retried with backoff. Until a 423 shows that the server had the upload
   * open and then closed it, the handler may not have opened the file yet (it would create it
   * after our DELETE), so the path is watched for about 1.5 s more and removed if it appears.
   */
  private async removeCutUpload(rel: string): Promise<void> {
    const ctx = this.ctx('remove', rel);
    const del = async (): Promise<number> => {
      const res = await this.dav.request({ method: 'DELETE', serverPath: this.serverPath(rel), ctx, accept: [404, 423] });
      res.discard();
      return res.status;
    };
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
    try {
      let sawLock = false;
      for (let delayMs = 25; ; delayMs *= 2) {
        const status = await del();
        if (status !== 423) break;
        sawLock = true;
        if (delayMs > 6_000) return;
        await sleep(delayMs);
      }
      if (sawLock) return;
      for (let delayMs = 100; delayMs <= 800; delayMs *= 2) {
        await sleep(delayMs);
        if (await this.stat(rel)) return this.removeCutUpload(rel);
      }
    } catch {
      // Left for the engine's cleanup of temporary names; the write's own error is what matters.
    }
  }

  async rename(from: string, to: string, options?: { signal?: AbortSignal }): Promise<void> {
    const src = relativePath(from);
    const dst = relativePath(to);
    const ctx = this.ctx('rename', src);
    if (src === '' || dst === '') throw new ConnectorError('PERMISSION', 'rename cannot move the base path or onto it');
    await this.mkdirs(parentOf(dst), options?.signal);
    try {
      const res = await this.dav.request({
        method: 'MOVE', serverPath: this.serverPath(src), signal: options?.signal, ctx,
        headers: { Destination: this.dav.url(this.serverPath(dst)), Overwrite: 'T' },
      });
      res.discard();
    } catch (err) {
      // Some servers (rclone) answer a missing source with 403: tell the two apart.
      if (err instanceof ConnectorError && err.code === 'PERMISSION' && !(await this.stat(src, options))) {
        throw new ConnectorError('NOT_FOUND', `rename ${JSON.stringify(src)} on ${this.config.endpoint}: not found`, { cause: err });
      }
      throw err;
    }
  }

  async test(options?: { signal?: AbortSignal }): Promise<string> {
    const ctx = this.ctx('test', '');
    const found = await this.dav.propfind(this.serverPath(''), 0, ctx, options?.signal);
    const { origin, basePath } = this.config;
    if (!found?.[0]) throw new ConnectorError('NOT_FOUND', `base path ${basePath} does not exist on the WebDAV server ${origin}`);
    if (!found[0].collection) throw new ConnectorError('CONFLICT', `base path ${basePath} on ${origin} is not a directory`);
    return `WebDAV server ${origin} accepted the credentials; base path ${basePath} is a directory`;
  }

  async close(): Promise<void> {
    this.dav.close();
  }

  private ctx(op: string, path: string): WebdavErrorContext {
    return { op, path, endpoint: this.config.endpoint };
  }

  private serverPath(rel: string): string {
    const base = this.config.basePath === '/' ? '' : this.config.basePath;
    return rel === '' ? base || '/' : `${base}/${rel}`;
  }

  /** The relative path of a child in a listing of `own`; null when the server names something else or an unusable name. */
  private childPath(resource: DavResource, own: string, rel: string): string | null {
    const prefix = own === '/' ? '/' : `${own}/`;
    if (!resource.serverPath.startsWith(prefix)) return null;
    const name = resource.serverPath.slice(prefix.length);
    if (name === '' || name.includes('/')) return null;
    try {
      return relativePath(joinRel(rel, name)) === joinRel(rel, name) ? joinRel(rel, name) : null;
    } catch {
      return null;
    }
  }

  private entry(rel: string, resource: DavResource): Entry {
    return {
      path: rel, kind: resource.collection ? 'directory' : 'file', size: resource.collection ? 0 : resource.size,
      ...(resource.modifiedAt ? { modifiedAt: resource.modifiedAt } : {}),
      ...(resource.etag ? { etag: resource.etag } : {}),
    };
  }
}

/** The registry's factory (connectors/index.ts). */
export function createWebdavConnector(settings: ConnectionSettings, context?: ConnectorContext): Connector {
  return new WebdavConnector(settings, context?.access);
}

import { tmpdir } from 'node:os';
import { Readable } from 'node:stream';
import type { ConnectionSettings } from '@xfer/shared';
import { baseName, joinRel, parentOf, relativePath } from '../paths.js';
import { closedAccess } from '../access.js';
import { ConnectorError, type Connector, type ConnectorCapabilities, type Checksum, type ConnectorContext, type Entry, type ServerCopyOptions, type WriteOptions, type WriteResult } from '../types.js';
import { onedriveConfig, type OnedriveConfig } from './onedrive.config.js';
import { requestError, type GraphErrorContext } from './onedrive.errors.js';
import { bodyChunks } from '../io/http-body.js';
import { SingleFlight } from '../single-flight.js';
import { monitorUrl, sameAccount, waitForCopy } from './onedrive.copy.js';
import { GraphClient, type DriveItem, type GraphPage } from './onedrive.graph.js';
import { endpointOf, HttpsClient } from './onedrive.http.js';
import { TokenSource } from './onedrive.token.js';
import { upload } from './onedrive.upload.js';

/** Items per page of a children listing ($top): never more in memory per folder level. */
const PAGE_SIZE = 200;

export interface OnedriveConnectorOptions {
  /** What the agent gives connectors: where rotated refresh tokens are reported. */
  context?: ConnectorContext;
  /** Certificates to trust for Graph and the login host instead of the system's (a test's fake); TLS is always verified. */
  ca?: string | Buffer;
  /** Where a body of unknown length above 4 MiB is spooled (default: the OS temporary directory). */
  tmpDir?: string;
}

/**
 * OneDrive and SharePoint document libraries through Microsoft Graph (v1.0 drive API), signed in
 * with the OAuth refresh-token grant. Items are addressed by path (`root:/a/b:`), folders listed
 * a page of 200 children at a time, files read through their pre-authenticated download URL
 * (with Range), written by simple upload (≤ 4 MiB) or an upload session, and every write is
 * checked against the QuickXorHash Graph computes of what it stored.
 */
export class OnedriveConnector implements Connector {
  readonly type = 'onedrive' as const;
  readonly capabilities: ConnectorCapabilities = { rename: true, directories: true, verifiesWrites: true, modTime: 'set', modTimePrecision: 1000, parallelReads: true };
  private readonly config: OnedriveConfig;
  private readonly http: HttpsClient;
  private readonly graph: GraphClient;
  private readonly tmpDir: string;
  /** mkdir chains in flight, by relative path (parallel writes into one new folder). */
  private readonly creating = new SingleFlight<void>();

  constructor(settings: ConnectionSettings, options: OnedriveConnectorOptions = {}) {
    this.config = onedriveConfig(settings);
    this.http = new HttpsClient((options.context?.access ?? closedAccess()).network, options.ca);
    const report = options.context?.credentialsChanged;
    const tokens = new TokenSource(this.config, this.http, report ? (refreshToken, spent) => report({ refresh_token: refreshToken }, { refresh_token: spent }) : undefined);
    this.graph = new GraphClient(this.config, this.http, tokens);
    this.tmpDir = options.tmpDir ?? tmpdir();
  }

  async *list(path: string, options: { recursive: boolean; signal?: AbortSignal }): AsyncIterable<Entry> {
    const rel = relativePath(path);
    const self = await this.item(rel, 'list', options.signal);
    if (!self) throw new ConnectorError('NOT_FOUND', `list ${JSON.stringify(rel)} on ${this.config.endpoint}: no such folder`);
    if (!self.folder) throw new ConnectorError('CONFLICT', `list ${JSON.stringify(rel)} on ${this.config.endpoint}: not a folder`);
    yield* this.walk(rel, options.recursive, options.signal);
  }

  /**
   * One folder's children, a page ($top=200, then @odata.nextLink) at a time; a child folder's
   * subtree follows it at once when recursive, so only the current page of each level on the way
   * down is in memory.
   */
  private async *walk(rel: string, recursive: boolean, signal?: AbortSignal): AsyncIterable<Entry> {
    let url: string | undefined = `${this.itemUrl(rel)}/children?$top=${PAGE_SIZE}`;
    while (url) {
      const page: GraphPage<DriveItem> | null = await this.graph.json<GraphPage<DriveItem>>({ method: 'GET', url, signal, ctx: { op: 'list', path: rel }, accept: [404] })
        .catch((err: unknown) => {
          // Gone since its parent was listed: nothing to list.
          if (err instanceof ConnectorError && err.code === 'NOT_FOUND' && rel !== '') return null;
          throw err;
        });
      if (!page || !Array.isArray(page.value)) return;
      for (const item of page.value) {
        const child = childPath(rel, item.name);
        if (child === null) continue;
        yield this.entry(child, item);
        if (recursive && item.folder) yield* this.walk(child, true, signal);
      }
      url = page['@odata.nextLink'];
    }
  }

  async stat(path: string, options?: { signal?: AbortSignal }): Promise<Entry | null> {
    const rel = relativePath(path);
    const item = await this.item(rel, 'stat', options?.signal);
    return item ? this.entry(rel, item) : null;
  }

  async read(path: string, options: { start?: number; end?: number; signal?: AbortSignal } = {}): Promise<Readable> {
    const rel = relativePath(path);
    const ctx = { op: 'read', path: rel };
    const start = options.start ?? 0;
    if (options.end !== undefined && options.end < start) return Readable.from([]);
    const ranged = start > 0 || options.end !== undefined;
    const headers: Record<string, string> = ranged ? { Range: `bytes=${start}-${options.end ?? ''}` } : {};
    // /content answers 302 with a pre-authenticated downloadUrl: followed here, without the token.
    let res = await this.graph.request({ method: 'GET', url: `${this.itemUrl(rel)}/content`, headers, signal: options.signal, ctx, accept: [302, 416] });
    let endpoint = this.config.endpoint;
    if (res.status === 302) {
      const location = res.headers.location;
      res.discard();
      if (!location) throw new ConnectorError('TRANSIENT', `read ${JSON.stringify(rel)} on ${this.config.endpoint}: a redirect without a Location`);
      const downloadUrl = new URL(location, this.config.graphOrigin).href;
      res = await this.graph.request({ method: 'GET', url: downloadUrl, auth: false, headers, signal: options.signal, ctx, accept: [416] });
      endpoint = endpointOf(downloadUrl);
    }
    // 416: the range starts past the end, so there is nothing to read.
    if (res.status === 416) {
      res.discard();
      return Readable.from([]);
    }
    // A server that ignores Range answers 200 with the whole file: the range is cut out here.
    const skip = ranged && res.status === 200 ? start : 0;
    const limit = ranged && res.status === 200 && options.end !== undefined ? options.end - start + 1 : Infinity;
    const errCtx: GraphErrorContext = { ...ctx, endpoint };
    return Readable.from(bodyChunks(res.body, { skip, limit, signal: options.signal, fail: (err) => requestError(err, errCtx, options.signal) }), { objectMode: false });
  }

  async write(path: string, body: Readable, options: WriteOptions): Promise<WriteResult> {
    const rel = relativePath(path);
    const ctx = { op: 'write', path: rel, endpoint: this.config.endpoint };
    if (rel === '') throw new ConnectorError('CONFLICT', 'write needs a file path, not the base path');
    if (options.signal?.aborted) {
      body.destroy();
      throw requestError(options.signal.reason, ctx, options.signal);
    }
    let uploaded;
    try {
      // Graph creates missing parent folders of a path-addressed upload itself.
      uploaded = await upload(this.graph, body, { itemUrl: this.itemUrl(rel), rel, signal: options.signal, tmpDir: this.tmpDir }, options.size);
    } catch (err) {
      body.destroy();
      if (options.signal?.aborted) throw requestError(options.signal.reason, ctx, options.signal);
      throw requestError(err, ctx);
    }
    const { item, size, quickXorHash } = uploaded;
    const stored = item.file?.hashes?.quickXorHash;
    if (item.size !== undefined && item.size !== size) {
      await this.removeQuietly(rel);
      throw new ConnectorError('TRANSIENT', `write ${JSON.stringify(rel)} on ${this.config.endpoint}: Graph stored ${item.size} bytes of ${size}`);
    }
    if (options.modifiedAt) await this.setModifiedAt(rel, options.modifiedAt, options.signal);
    if (!stored) return { size };
    if (stored !== quickXorHash) {
      await this.removeQuietly(rel);
      throw new ConnectorError('TRANSIENT', `write ${JSON.stringify(rel)} on ${this.config.endpoint}: the QuickXorHash Graph computed differs from the bytes sent`);
    }
    // Graph hashed what it stored, the connector what it sent: equal, every byte arrived.
    return { size, checksum: quickXorChecksum(stored), storeVerified: 'quickxorhash' };
  }

  /**
   * PATCH fileSystemInfo.lastModifiedDateTime, as rclone does (Graph keeps whole seconds), after
   * the content is in: a later upload would move it, a rename keeps it. A refusal removes the file.
   */
  private async setModifiedAt(rel: string, time: Date, signal: AbortSignal | undefined): Promise<void> {
    const ctx = { op: 'write', path: rel, endpoint: this.config.endpoint };
    try {
      const res = await this.graph.request({
        method: 'PATCH', url: this.itemUrl(rel), signal, ctx, headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ fileSystemInfo: { lastModifiedDateTime: time.toISOString() } }),
      });
      res.discard();
    } catch (err) {
      await this.removeQuietly(rel);
      throw requestError(err, ctx, signal);
    }
  }

  /**
   * Server-side copy (docs/connectors.md "Server-side copies") with Graph's `copy` action, between
   * two connections of the same user on the same drive (`sameAccount`), of a file whose listing has
   * a QuickXorHash; null otherwise, before any request (the engine moves the bytes).
   *
   * Graph's copy names no version of the source (no if-match), so the listed version is held by
   * hashes: the source is checked against the listing first (size and QuickXorHash; a rewritten
   * source fails CONFLICT), and the new item's QuickXorHash, which Graph computes from the bytes it
   * stored, must equal the listed one — a copy of any other content is deleted and the file fails.
   * Graph does not say whether a copy in progress is visible, so it is made under the engine's
   * temporary name beside the target (hidden, swept as a leftover if Graph finishes it after a
   * failure), then renamed onto the target with the kept modification time in the same PATCH.
   */
  async copyFrom(source: Connector, sourcePath: string, path: string, options: ServerCopyOptions): Promise<WriteResult | null> {
    const listed = options.entry;
    if (!(source instanceof OnedriveConnector) || options.tempPath === undefined || !sameAccount(this.config, source.config) || listed.kind !== 'file') return null;
    if (listed.checksum?.algorithm !== 'quickxor') return null;
    const rel = relativePath(path);
    const from = relativePath(sourcePath);
    if (rel === '') throw new ConnectorError('CONFLICT', 'copy needs a file path, not the base path');
    const { signal } = options;
    const what = `copy ${JSON.stringify(rel)} on ${this.config.endpoint}`;
    const original = await source.item(from, 'copy', signal);
    if (!original?.file) throw new ConnectorError('NOT_FOUND', `${what}: the source ${JSON.stringify(from)} is gone since it was listed`);
    if (original.size !== listed.size || quickXorChecksum(original.file.hashes?.quickXorHash ?? '')?.value !== listed.checksum.value) {
      throw new ConnectorError('CONFLICT', `${what}: source changed since it was listed (its size or QuickXorHash differs)`);
    }
    // Asked only now that the copy goes ahead: it may cost a stat of the source.
    const modifiedAt = await options.modifiedAt?.();
    const folder = parentOf(rel);
    await this.mkdirs(folder, signal);
    const parent = await this.item(folder, 'copy', signal);
    if (!parent?.folder && !parent?.root) throw new ConnectorError('CONFLICT', `${what}: the target's folder is missing`);
    // The engine's temporary name for the attempt, in the target's folder whatever folder it names.
    const temp = joinRel(folder, baseName(relativePath(options.tempPath)));
    const ctx = { op: 'copy', path: rel };
    // Both connections address the same drive (sameAccount): the source item by its id, which the checks above saw.
    const driveId = parent.parentReference?.driveId ?? original.parentReference?.driveId;
    const accepted = await this.graph.request({
      method: 'POST', url: `${this.config.drivePath}/items/${encodeURIComponent(original.id)}/copy?@microsoft.graph.conflictBehavior=fail`, signal, ctx,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ parentReference: { ...(driveId ? { driveId } : {}), id: parent.id }, name: baseName(temp) }),
    });
    accepted.discard();
    try {
      const resourceId = accepted.status === 202 ? await waitForCopy(this.graph, monitorUrl(accepted.headers.location, this.config.graphOrigin, what), ctx, signal) : undefined;
      const copy = await this.item(temp, 'copy', signal);
      if (!copy?.file || (resourceId !== undefined && copy.id !== resourceId)) throw new ConnectorError('TRANSIENT', `${what}: Microsoft Graph reported the copy done, but it is not at its temporary name`);
      const stored = copy.file.hashes?.quickXorHash;
      if (copy.size !== listed.size || quickXorChecksum(stored ?? '')?.value !== listed.checksum.value) {
        throw new ConnectorError('TRANSIENT', `${what}: the copy Microsoft Graph made differs from the listed source (${copy.size ?? '?'} bytes of ${listed.size}, QuickXorHash ${stored ? 'different' : 'missing'}); the copy was removed`);
      }
      // One PATCH: the rename onto the target (replacing it, as a write's rename does) and the kept time.
      const res = await this.graph.request({
        method: 'PATCH', url: `${this.itemUrl(temp)}?@microsoft.graph.conflictBehavior=replace`, signal, ctx, headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ name: baseName(rel), ...(modifiedAt ? { fileSystemInfo: { lastModifiedDateTime: modifiedAt.toISOString() } } : {}) }),
      });
      res.discard();
      return { size: listed.size, checksum: listed.checksum, storeVerified: 'server-copy-quickxorhash' };
    } catch (err) {
      // No signal: the clean-up also runs after a cancel. A copy Graph completes after this keeps the temporary name (a leftover the sweep removes).
      await this.removeQuietly(temp);
      throw requestError(err, { ...ctx, endpoint: this.config.endpoint }, signal);
    }
  }

  async mkdir(path: string, options?: { signal?: AbortSignal }): Promise<void> {
    await this.mkdirs(relativePath(path), options?.signal);
  }

  /**
   * POST children `{name, folder: {}, conflictBehavior: fail}` into the parent; when the parent
   * is missing (404), the parent first, then again. nameAlreadyExists (409) is success when a
   * folder is there, CONFLICT when a file is. Concurrent calls for one path share one chain.
   */
  private mkdirs(rel: string, signal?: AbortSignal): Promise<void> {
    if (rel === '') return Promise.resolve();
    return this.creating.run(rel, () => this.createFolder(rel, signal));
  }

  private async createFolder(rel: string, signal?: AbortSignal): Promise<void> {
    const ctx = { op: 'mkdir', path: rel };
    const post = async () => {
      const res = await this.graph.request({
        method: 'POST', url: `${this.itemUrl(parentOf(rel))}/children`, signal, ctx, accept: [404, 409],
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ name: baseName(rel), folder: {}, '@microsoft.graph.conflictBehavior': 'fail' }),
      });
      res.discard();
      return res.status;
    };
    let status = await post();
    if (status === 404) {
      await this.mkdirs(parentOf(rel), signal);
      status = await post();
    }
    if (status === 409) {
      const found = await this.item(rel, 'mkdir', signal);
      if (found?.folder) return;
      throw new ConnectorError('CONFLICT', `mkdir ${JSON.stringify(rel)} on ${this.config.endpoint}: ${found ? 'a file is in the way' : 'the name is taken'}`);
    }
    if (status === 404) throw new ConnectorError('CONFLICT', `mkdir ${JSON.stringify(rel)} on ${this.config.endpoint}: a parent is not a folder`);
  }

  async remove(path: string, options?: { signal?: AbortSignal }): Promise<void> {
    const rel = relativePath(path);
    if (rel === '') throw new ConnectorError('PERMISSION', "refusing to remove the connection's base path");
    // DELETE of a folder removes everything below it: one request. Missing is success.
    const res = await this.graph.request({ method: 'DELETE', url: this.itemUrl(rel), signal: options?.signal, ctx: { op: 'remove', path: rel }, accept: [404] });
    res.discard();
  }

  async rename(from: string, to: string, options?: { signal?: AbortSignal }): Promise<void> {
    const src = relativePath(from);
    const dst = relativePath(to);
    if (src === '' || dst === '') throw new ConnectorError('PERMISSION', 'rename cannot move the base path or onto it');
    const ctx = { op: 'rename', path: src };
    await this.mkdirs(parentOf(dst), options?.signal);
    const parent = await this.item(parentOf(dst), 'rename', options?.signal);
    if (!parent?.folder) throw new ConnectorError('CONFLICT', `rename ${JSON.stringify(src)} on ${this.config.endpoint}: the target's folder is missing`);
    // The parent by id: a parentReference path would differ between /me/drive and /drives/{id}.
    const res = await this.graph.request({
      method: 'PATCH', url: `${this.itemUrl(src)}?@microsoft.graph.conflictBehavior=replace`, signal: options?.signal, ctx,
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: baseName(dst), parentReference: { id: parent.id } }),
    });
    res.discard();
  }

  async test(options?: { signal?: AbortSignal }): Promise<string> {
    const item = await this.item('', 'test', options?.signal);
    const { basePath, endpoint, drivePath } = this.config;
    const drive = drivePath.endsWith('/me/drive') ? "the signed-in user's drive" : `drive ${decodeURIComponent(drivePath.slice(drivePath.lastIndexOf('/') + 1))}`;
    if (!item) throw new ConnectorError('NOT_FOUND', `base path ${basePath} does not exist in ${drive} (Microsoft Graph at ${endpoint})`);
    if (!item.folder) throw new ConnectorError('CONFLICT', `base path ${basePath} in ${drive} is a file, not a folder`);
    return `Microsoft Graph at ${endpoint} accepted the credentials; base path ${basePath} is a folder in ${drive}`;
  }

  async close(): Promise<void> {
    this.http.close();
  }

  /** The driveItem at `rel`, or null when nothing is there. */
  private async item(rel: string, op: string, signal?: AbortSignal): Promise<DriveItem | null> {
    const res = await this.graph.request({ method: 'GET', url: this.itemUrl(rel), signal, ctx: { op, path: rel }, accept: [404] });
    if (res.status === 404) {
      res.discard();
      return null;
    }
    return JSON.parse(await res.text()) as DriveItem;
  }

  private async removeQuietly(rel: string): Promise<void> {
    await this.remove(rel).catch(() => undefined);
  }

  /** The path-addressed item (`/v1.0/me/drive/root:/base/a/b:`), each segment percent-encoded. */
  private itemUrl(rel: string): string {
    const segments = [...this.config.basePath.split('/'), ...rel.split('/')].filter((s) => s !== '');
    if (segments.length === 0) return `${this.config.drivePath}/root`;
    return `${this.config.drivePath}/root:/${segments.map((s) => encodeURIComponent(s)).join('/')}:`;
  }

  private entry(rel: string, item: DriveItem): Entry {
    // The file's own time (what a client set, rclone's modification time) before the upload's.
    const time = item.fileSystemInfo?.lastModifiedDateTime ?? item.lastModifiedDateTime;
    const modified = time ? new Date(time) : undefined;
    const checksum = item.file?.hashes?.quickXorHash ? quickXorChecksum(item.file.hashes.quickXorHash) : undefined;
    return {
      path: rel, kind: item.folder || item.root ? 'directory' : 'file', size: item.folder ? 0 : item.size ?? 0,
      ...(modified && !Number.isNaN(modified.getTime()) ? { modifiedAt: modified } : {}),
      ...(checksum ? { checksum } : {}),
      ...(item.eTag ? { etag: item.eTag } : {}),
    };
  }
}

/** Graph's QuickXorHash (base64 of 20 bytes) as a Checksum (lower-case hex); undefined when malformed. */
function quickXorChecksum(base64: string): Checksum | undefined {
  const bytes = Buffer.from(base64, 'base64');
  return bytes.length === 20 ? { algorithm: 'quickxor', value: bytes.toString('hex') } : undefined;
}

/** The relative path of a child named `name` of `rel`; null for a name no connector path can name. */
function childPath(rel: string, name: unknown): string | null {
  if (typeof name !== 'string' || name === '' || name.includes('/')) return null;
  try {
    const child = joinRel(rel, name);
    return relativePath(child) === child ? child : null;
  } catch {
    return null;
  }
}

/** The registry's factory (connectors/index.ts). */
export function createOnedriveConnector(settings: ConnectionSettings, context?: ConnectorContext): Connector {
  return new OnedriveConnector(settings, { context });
}

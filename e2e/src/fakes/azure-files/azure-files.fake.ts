import { createHash, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { unlink } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { FakeError, errorXml, xmlEscape } from './azure-files.errors.js';
import { FakeStore, type FileProperties, type Node } from './azure-files.store.js';
import { verify } from './shared-key.js';

const MiB = 1024 * 1024;
/** Put Range: an update writes at most 4 MiB (Microsoft's Put Range). */
const MAX_RANGE_BYTES = 4 * MiB;
/** Create File / Set File Properties: at most 4 TiB. */
const MAX_FILE_BYTES = 4 * 1024 * 1024 * MiB;
/** Shared Key requests older or newer than this are refused ("Authorize with Shared Key"). */
const MAX_CLOCK_SKEW_MS = 15 * 60_000;
/** The earliest version whose string-to-sign the fake computes (Content-Length empty when zero). */
const MIN_VERSION = '2015-02-21';
/** Rename File exists from this version on. */
const RENAME_VERSION = '2021-04-10';
/** List Directories and Files: at most 5,000 entries a page. */
const MAX_RESULTS = 5000;

export interface AzureFilesFakeOptions {
  /** Directory for shares and spooled range bodies. */
  root: string;
  account: string;
  /** The account key, base64, as the portal shows it. */
  key: string;
}

interface Request {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  version: string;
  share: string;
  /** Path below the share, decoded segments. */
  parts: string[];
  query: URLSearchParams;
}

/**
 * A FAKE of the Azure Files REST API (the File service of Azure Storage): no emulator of it exists
 * (Azurite has none), so this implements, from Microsoft's REST reference, exactly the operations
 * the fileshare connector and its tests use, with path-style addressing
 * (`http://127.0.0.1:<port>/<account>/<share>/<path>`) as the storage emulators have it (and
 * host-style paths, see `route`):
 * Create/Delete/Get Share Properties, Create/Delete/Get Directory Properties, List Directories and
 * Files, Create File, Put Range, Get File, Get File Properties, Set File Properties, Delete File
 * and Rename File. Every request must carry x-ms-version and a valid Shared Key signature.
 * Known differences from the service are listed in docs/connectors.md ("fileshare").
 */
export class AzureFilesFake {
  private readonly store: FakeStore;
  private readonly server: Server;

  constructor(private readonly options: AzureFilesFakeOptions) {
    this.store = new FakeStore(options.root);
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.keepAliveTimeout = 30_000;
  }

  async listen(port: number, host = '127.0.0.1'): Promise<number> {
    await new Promise<void>((ok, fail) => {
      this.server.once('error', fail);
      this.server.listen(port, host, () => ok());
    });
    return (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((ok) => this.server.close(() => ok()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = randomUUID();
    const version = single(req.headers['x-ms-version']);
    res.setHeader('x-ms-request-id', requestId);
    if (version) res.setHeader('x-ms-version', version);
    res.setHeader('Date', new Date().toUTCString());
    try {
      this.authorize(req);
      const r = this.route(req, res, requestId);
      await this.dispatch(r);
    } catch (err) {
      this.fail(req, res, requestId, err);
    }
  }

  /** The checks of "Authorize with Shared Key", in the order a client can act on them. */
  private authorize(req: IncomingMessage): void {
    if (!req.headers.authorization) throw new FakeError(401, 'NoAuthenticationInformation', 'Server failed to authenticate the request. Please refer to the information in the www-authenticate header.');
    const version = single(req.headers['x-ms-version']);
    if (!version) throw new FakeError(400, 'MissingRequiredHeader', 'An HTTP header that\'s mandatory for this request is not specified.', { HeaderName: 'x-ms-version' });
    if (!/^\d{4}-\d{2}-\d{2}$/.test(version) || version < MIN_VERSION) {
      throw new FakeError(400, 'InvalidHeaderValue', 'The value for one of the HTTP headers is not in the correct format.', { HeaderName: 'x-ms-version', HeaderValue: version });
    }
    const authFailed = (detail: string) => new FakeError(403, 'AuthenticationFailed', 'Server failed to authenticate the request. Make sure the value of Authorization header is formed correctly including the signature.', { AuthenticationErrorDetail: detail });
    const date = single(req.headers['x-ms-date']) ?? single(req.headers.date);
    if (!date) throw authFailed('Request date header not specified.');
    const at = Date.parse(date);
    if (Number.isNaN(at)) throw authFailed(`The Date header in the request is incorrect: ${date}`);
    if (Math.abs(Date.now() - at) > MAX_CLOCK_SKEW_MS) throw authFailed(`Request date header too old or in the future: '${date}'`);
    const verdict = verify(this.options.account, this.options.key, { method: req.method ?? 'GET', target: req.url ?? '/', headers: req.headers });
    if (!verdict.ok) throw authFailed(verdict.detail);
  }

  private route(req: IncomingMessage, res: ServerResponse, requestId: string): Request {
    const target = req.url ?? '/';
    const q = target.indexOf('?');
    const rawPath = q < 0 ? target : target.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : target.slice(q + 1));
    const segments = rawPath.split('/').slice(1).map((s) => decodePart(s));
    if (segments.length > 0 && segments[segments.length - 1] === '') segments.pop();
    // Path-style (/<account>/<share>/...), as emulators address an account; or host-style
    // (/<share>/...), as Azure is addressed (<account>.file.core.windows.net), the account being
    // the one whose key signed: the SDK's Rename File sends that form whatever the endpoint (it
    // replaces the whole URL path of the destination, account segment included).
    if (segments[0] === this.options.account) segments.shift();
    const [share, ...parts] = segments;
    if (!share) throw new FakeError(400, 'InvalidUri', 'The requested URI does not represent any resource on the server.');
    if (!/^[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}$/.test(share)) throw new FakeError(400, 'InvalidResourceName', 'The specifed resource name contains invalid characters.');
    for (const part of parts) {
      if (part === '' || part === '.' || part === '..' || part.length > 255 || /["\\/:|<>*?\u0000-\u001f]/.test(part)) {
        throw new FakeError(400, 'InvalidResourceName', 'The specifed resource name contains invalid characters.');
      }
    }
    return { req, res, requestId, version: single(req.headers['x-ms-version'])!, share, parts, query };
  }

  private async dispatch(r: Request): Promise<void> {
    const method = r.req.method ?? 'GET';
    const restype = r.query.get('restype');
    const comp = r.query.get('comp');
    const op = [method, restype, comp].filter((x) => x !== null).join(' ');
    if (restype === 'share' && r.parts.length === 0) {
      if (op === 'PUT share') return this.createShare(r);
      if (op === 'DELETE share') return this.deleteShare(r);
      if (op === 'GET share' || op === 'HEAD share') return this.shareProperties(r);
    } else if (restype === 'directory') {
      if (op === 'PUT directory') return this.createDirectory(r);
      if (op === 'DELETE directory') return this.deleteDirectory(r);
      if (op === 'GET directory' || op === 'HEAD directory') return this.directoryProperties(r);
      if (op === 'GET directory list') return this.list(r);
    } else if (restype === null && r.parts.length > 0) {
      if (op === 'PUT') return this.createFile(r);
      if (op === 'PUT range') return this.putRange(r);
      if (op === 'GET' || op === 'HEAD') return this.getFile(r, method === 'HEAD');
      if (op === 'PUT properties') return this.setFileProperties(r);
      if (op === 'DELETE') return this.deleteFile(r);
      if (op === 'PUT rename') return this.renameFile(r);
    }
    throw new FakeError(400, 'UnsupportedQueryParameter', `The fake of Azure Files does not implement ${op} on this resource.`);
  }

  // --- shares ---

  private async createShare(r: Request): Promise<void> {
    await this.store.createShare(r.share);
    this.send(r, 201, await this.store.node(this.store.sharePath(r.share)));
  }

  private async deleteShare(r: Request): Promise<void> {
    await this.store.deleteShare(r.share);
    this.send(r, 202);
  }

  private async shareProperties(r: Request): Promise<void> {
    const node = await this.store.node(this.store.sharePath(r.share));
    if (!node) throw shareNotFound();
    r.res.setHeader('x-ms-share-quota', '5120');
    this.send(r, 200, node);
  }

  // --- directories ---

  private async createDirectory(r: Request): Promise<void> {
    if (r.parts.length === 0) throw new FakeError(409, 'ResourceAlreadyExists', 'The specified resource already exists.');
    await this.store.requireParent(r.share, r.parts);
    const path = this.store.path(r.share, r.parts);
    await this.store.createDirectory(path);
    this.send(r, 201, await this.store.node(path));
  }

  private async deleteDirectory(r: Request): Promise<void> {
    if (r.parts.length === 0) throw new FakeError(409, 'CannotDeleteFileOrDirectory', 'The root directory of a share cannot be deleted.');
    const node = await this.existing(r);
    if (node.kind !== 'directory') throw typeMismatch();
    await this.store.deleteDirectory(this.store.path(r.share, r.parts));
    this.send(r, 202);
  }

  private async directoryProperties(r: Request): Promise<void> {
    const node = await this.existing(r);
    if (node.kind !== 'directory') throw notFound();
    this.send(r, 200, node);
  }

  /** List Directories and Files: one level, name order, `maxresults` a page, an opaque NextMarker. */
  private async list(r: Request): Promise<void> {
    const node = await this.existing(r);
    if (node.kind !== 'directory') throw notFound();
    const maxResults = r.query.has('maxresults') ? Number(r.query.get('maxresults')) : MAX_RESULTS;
    if (!Number.isInteger(maxResults) || maxResults < 1) throw new FakeError(400, 'OutOfRangeQueryParameterValue', 'One of the query parameters specified in the request URI is outside the permissible range.', { QueryParameterName: 'maxresults' });
    const prefix = r.query.get('prefix') ?? '';
    const marker = r.query.get('marker');
    let after: string | null = null;
    if (marker) {
      after = markerName(marker);
      if (after === null) throw new FakeError(400, 'InvalidContinuationToken', 'The specified continuation token is not valid.');
    }
    const include = new Set((r.query.get('include') ?? '').split(',').filter((s) => s !== '').map((s) => s.toLowerCase()));
    const extended = single(r.req.headers['x-ms-file-extended-info']) === 'true';
    const dirPath = this.store.path(r.share, r.parts);
    const all = (await this.store.entries(dirPath)).filter((e) => e.name.startsWith(prefix) && (after === null || e.name > after));
    const page = all.slice(0, Math.min(maxResults, MAX_RESULTS));
    const next = all.length > page.length ? makeMarker(page[page.length - 1]!.name) : '';
    const items: string[] = [];
    for (const entry of page) {
      const child = await this.store.node(this.store.path(r.share, [...r.parts, entry.name]));
      if (!child) continue; // removed while listing
      const tag = child.kind === 'directory' ? 'Directory' : 'File';
      const props: string[] = [];
      if (child.kind === 'file') props.push(`<Content-Length>${child.size}</Content-Length>`);
      if (include.has('timestamps')) {
        props.push(`<CreationTime>${isoTime(child.birthtime)}</CreationTime><LastAccessTime>${isoTime(child.mtime)}</LastAccessTime><LastWriteTime>${isoTime(child.mtime)}</LastWriteTime><ChangeTime>${isoTime(child.mtime)}</ChangeTime><Last-Modified>${child.mtime.toUTCString()}</Last-Modified>`);
      }
      if (include.has('etag')) props.push(`<Etag>${xmlEscape(child.etag)}</Etag>`);
      items.push(
        `<${tag}>${extended || include.size > 0 ? `<FileId>${child.fileId}</FileId>` : ''}<Name>${xmlEscape(entry.name)}</Name><Properties>${props.join('')}</Properties>` +
          `${include.has('attributes') ? `<Attributes>${child.kind === 'directory' ? 'Directory' : 'Archive'}</Attributes>` : ''}` +
          `${include.has('permissionkey') ? '<PermissionKey>1*1</PermissionKey>' : ''}</${tag}>`,
      );
    }
    const endpoint = `http://${r.req.headers.host ?? '127.0.0.1'}/${this.options.account}/`;
    const xml =
      `<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="${xmlEscape(endpoint)}" ShareName="${xmlEscape(r.share)}" DirectoryPath="${xmlEscape(r.parts.join('/'))}">` +
      `${prefix ? `<Prefix>${xmlEscape(prefix)}</Prefix>` : ''}${marker ? `<Marker>${xmlEscape(marker)}</Marker>` : ''}` +
      `${r.query.has('maxresults') ? `<MaxResults>${maxResults}</MaxResults>` : ''}<DirectoryId>${node.fileId}</DirectoryId>` +
      `<Entries>${items.join('')}</Entries><NextMarker>${xmlEscape(next)}</NextMarker></EnumerationResults>`;
    r.res.setHeader('Content-Type', 'application/xml');
    this.send(r, 200, undefined, xml);
  }

  // --- files ---

  private async createFile(r: Request): Promise<void> {
    if (single(r.req.headers['x-ms-type']) !== 'file') throw missingHeader('x-ms-type');
    const size = lengthHeader(r, 'x-ms-content-length', true)!;
    await this.store.requireParent(r.share, r.parts);
    const path = this.store.path(r.share, r.parts);
    const there = await this.store.node(path);
    if (there?.kind === 'directory') throw typeMismatch();
    await this.store.createFile(path, size, httpProperties(r.req));
    this.send(r, 201, await this.store.node(path));
  }

  /**
   * Put Range. update: the body (Content-Length equal to the range, at most 4 MiB) is spooled to
   * disk while its MD5 is computed, checked against Content-MD5 (Md5Mismatch), then copied into
   * the file, so a refused body changes nothing. clear: zeros over the range, no body, no
   * Content-MD5. A range past the end of the file is InvalidRange (416): files do not grow by
   * writing, only by Create File or Set File Properties.
   */
  private async putRange(r: Request): Promise<void> {
    const write = single(r.req.headers['x-ms-write']);
    if (write !== 'update' && write !== 'clear') throw write ? invalidHeader('x-ms-write', write) : missingHeader('x-ms-write');
    const rangeText = single(r.req.headers['x-ms-range']) ?? single(r.req.headers.range);
    if (!rangeText) throw missingHeader('x-ms-range');
    const range = /^bytes=(\d+)-(\d+)$/.exec(rangeText);
    if (!range || Number(range[2]) < Number(range[1])) throw invalidHeader('x-ms-range', rangeText);
    const start = Number(range[1]);
    const end = Number(range[2]);
    const length = lengthHeader(r, 'content-length', true)!;
    const contentMd5 = single(r.req.headers['content-md5']);
    const node = await this.existing(r);
    if (node.kind !== 'file') throw typeMismatch();
    if (end >= node.size) throw new FakeError(416, 'InvalidRange', 'The range specified is invalid for the current size of the resource.');
    const path = this.store.path(r.share, r.parts);
    if (write === 'clear') {
      if (length !== 0) throw invalidHeader('content-length', String(length));
      if (contentMd5 !== undefined) throw new FakeError(400, 'InvalidHeaderValue', 'Content-MD5 is not allowed with x-ms-write: clear.', { HeaderName: 'Content-MD5', HeaderValue: contentMd5 });
      await pipeline(zeros(end - start + 1), createWriteStream(path, { flags: 'r+', start }));
      this.send(r, 201, await this.store.node(path));
      return;
    }
    if (end - start + 1 > MAX_RANGE_BYTES) throw new FakeError(413, 'RequestBodyTooLarge', 'The request body is too large and exceeds the maximum permissible limit.', { MaxLimit: String(MAX_RANGE_BYTES) });
    if (length !== end - start + 1) throw invalidHeader('content-length', String(length));
    const spool = this.store.spoolPath();
    try {
      const md5 = createHash('md5');
      await pipeline(r.req, new Transform({ transform(chunk: Buffer, _enc, done) { md5.update(chunk); done(null, chunk); } }), createWriteStream(spool));
      const got = md5.digest('base64');
      if (contentMd5 !== undefined && contentMd5 !== got) {
        throw new FakeError(400, 'Md5Mismatch', 'The MD5 value specified in the request did not match with the MD5 value calculated by the server.', { UserSpecifiedMd5: contentMd5, ServerCalculatedMd5: got });
      }
      // The file may have been resized or removed while the body arrived.
      const now = await this.store.node(path);
      if (!now) throw notFound();
      if (end >= now.size) throw new FakeError(416, 'InvalidRange', 'The range specified is invalid for the current size of the resource.');
      await pipeline(createReadStream(spool), createWriteStream(path, { flags: 'r+', start }));
      r.res.setHeader('Content-MD5', got);
      r.res.setHeader('x-ms-request-server-encrypted', 'true');
      this.send(r, 201, await this.store.node(path));
    } finally {
      await unlink(spool).catch(() => undefined);
    }
  }

  /**
   * Get File (GET) and Get File Properties (HEAD). A range (x-ms-range or Range, `bytes=s-[e]`)
   * answers 206 with Content-Range, the end clamped to the file; a start at or past the end is
   * 416 InvalidRange. x-ms-range-get-content-md5: true needs a range of at most 4 MiB and answers
   * that range's MD5; without a range, Content-MD5 is the file's property.
   */
  private async getFile(r: Request, head: boolean): Promise<void> {
    const node = await this.existing(r);
    if (node.kind !== 'file') throw notFound();
    const path = this.store.path(r.share, r.parts);
    this.fileHeaders(r.res, node);
    const rangeText = head ? undefined : (single(r.req.headers['x-ms-range']) ?? single(r.req.headers.range));
    const wantMd5 = single(r.req.headers['x-ms-range-get-content-md5']) === 'true';
    if (!rangeText) {
      if (wantMd5 && !head) throw new FakeError(400, 'InvalidHeaderValue', 'x-ms-range-get-content-md5 needs a range.', { HeaderName: 'x-ms-range-get-content-md5', HeaderValue: 'true' });
      if (node.properties.contentMd5) r.res.setHeader('Content-MD5', node.properties.contentMd5);
      r.res.setHeader('Content-Length', String(node.size));
      r.res.writeHead(200);
      if (head || node.size === 0) return void r.res.end();
      await pipeline(createReadStream(path, { end: node.size - 1 }), r.res);
      return;
    }
    const range = /^bytes=(\d+)-(\d*)$/.exec(rangeText);
    if (!range) throw invalidHeader('x-ms-range', rangeText);
    const start = Number(range[1]);
    const end = Math.min(range[2] === '' ? node.size - 1 : Number(range[2]), node.size - 1);
    if (range[2] !== '' && Number(range[2]) < start) throw invalidHeader('x-ms-range', rangeText);
    if (start >= node.size) {
      r.res.setHeader('Content-Range', `bytes */${node.size}`);
      throw new FakeError(416, 'InvalidRange', 'The range specified is invalid for the current size of the resource.');
    }
    if (wantMd5) {
      if (end - start + 1 > MAX_RANGE_BYTES) throw new FakeError(400, 'OutOfRangeInput', 'x-ms-range-get-content-md5 takes a range of at most 4 MiB.', { HeaderName: 'x-ms-range-get-content-md5' });
      const md5 = createHash('md5');
      for await (const chunk of createReadStream(path, { start, end })) md5.update(chunk as Buffer);
      r.res.setHeader('Content-MD5', md5.digest('base64'));
    } else if (node.properties.contentMd5) {
      // Get File: with a range, the file's whole Content-MD5 is shown as x-ms-content-md5.
      r.res.setHeader('x-ms-content-md5', node.properties.contentMd5);
    }
    r.res.setHeader('Content-Range', `bytes ${start}-${end}/${node.size}`);
    r.res.setHeader('Content-Length', String(end - start + 1));
    r.res.writeHead(206);
    await pipeline(createReadStream(path, { start, end }), r.res);
  }

  /** Set File Properties: x-ms-content-length resizes; the HTTP properties are replaced (absent ones cleared). */
  private async setFileProperties(r: Request): Promise<void> {
    const node = await this.existing(r);
    if (node.kind !== 'file') throw typeMismatch();
    const path = this.store.path(r.share, r.parts);
    const size = lengthHeader(r, 'x-ms-content-length', false);
    if (size !== undefined) await this.store.resize(path, size);
    this.store.setProperties(path, httpProperties(r.req));
    // x-ms-file-last-write-time: an ISO 8601 time sets it; `preserve` (the SDK's default) and `now` keep what the write made.
    const lastWrite = single(r.req.headers['x-ms-file-last-write-time']);
    if (lastWrite && lastWrite !== 'preserve' && lastWrite !== 'now') {
      const time = parseIsoTime(lastWrite);
      if (!time) throw invalidHeader('x-ms-file-last-write-time', lastWrite);
      await this.store.setLastWriteTime(path, time);
    }
    this.send(r, 200, await this.store.node(path));
  }

  private async deleteFile(r: Request): Promise<void> {
    const node = await this.existing(r);
    if (node.kind !== 'file') throw typeMismatch();
    await this.store.deleteFile(this.store.path(r.share, r.parts));
    this.send(r, 202);
  }

  /**
   * Rename File (version 2021-04-10 and later): the target is the request's path, the source the
   * x-ms-file-rename-source URI (same share); an existing target is replaced only with
   * x-ms-file-rename-replace-if-exists: true, else ResourceAlreadyExists.
   */
  private async renameFile(r: Request): Promise<void> {
    if (r.version < RENAME_VERSION) throw new FakeError(400, 'InvalidHeaderValue', `Rename File needs x-ms-version ${RENAME_VERSION} or later.`, { HeaderName: 'x-ms-version', HeaderValue: r.version });
    const sourceText = single(r.req.headers['x-ms-file-rename-source']);
    if (!sourceText) throw missingHeader('x-ms-file-rename-source');
    let sourcePath: string;
    try {
      sourcePath = new URL(sourceText, 'http://source.invalid').pathname;
    } catch {
      throw invalidHeader('x-ms-file-rename-source', sourceText);
    }
    const sourceSegments = sourcePath.split('/').slice(1).map((s) => decodePart(s));
    if (sourceSegments[0] === this.options.account) sourceSegments.shift();
    const [share, ...sourceParts] = sourceSegments;
    if (share !== r.share || sourceParts.length === 0) throw invalidHeader('x-ms-file-rename-source', sourceText);
    await this.store.requireParent(r.share, sourceParts);
    const from = this.store.path(r.share, sourceParts);
    const source = await this.store.node(from);
    if (source?.kind !== 'file') throw notFound();
    await this.store.requireParent(r.share, r.parts);
    const to = this.store.path(r.share, r.parts);
    const target = await this.store.node(to);
    if (target?.kind === 'directory') throw typeMismatch();
    if (target && single(r.req.headers['x-ms-file-rename-replace-if-exists']) !== 'true') throw new FakeError(409, 'ResourceAlreadyExists', 'The specified resource already exists.');
    await this.store.renameFile(from, to);
    this.send(r, 200, await this.store.node(to));
  }

  // --- helpers ---

  /** The node at the request's path: ShareNotFound, ParentNotFound or ResourceNotFound when it is not there. */
  private async existing(r: Request): Promise<Node> {
    if (r.parts.length > 0) await this.store.requireParent(r.share, r.parts);
    else if (!(await this.store.shareExists(r.share))) throw shareNotFound();
    const node = await this.store.node(this.store.path(r.share, r.parts));
    if (!node) throw notFound();
    return node;
  }

  private fileHeaders(res: ServerResponse, node: Node): void {
    // Get File and Get File Properties answer the times too (x-ms-file-last-write-time above all).
    nodeHeaders(res, node);
    const p = node.properties;
    res.setHeader('Content-Type', p.contentType ?? 'application/octet-stream');
    if (p.contentEncoding) res.setHeader('Content-Encoding', p.contentEncoding);
    if (p.contentLanguage) res.setHeader('Content-Language', p.contentLanguage);
    if (p.contentDisposition) res.setHeader('Content-Disposition', p.contentDisposition);
    if (p.cacheControl) res.setHeader('Cache-Control', p.cacheControl);
    res.setHeader('Accept-Ranges', 'bytes');
    res.setHeader('x-ms-type', 'File');
    res.setHeader('x-ms-server-encrypted', 'true');
  }

  /** A success answer with the node's common headers (ETag, Last-Modified, file id and times). */
  private send(r: Request, status: number, node?: Node | null, body?: string): void {
    if (node) {
      nodeHeaders(r.res, node);
    }
    r.res.setHeader('Content-Length', String(body === undefined ? 0 : Buffer.byteLength(body)));
    r.res.writeHead(status);
    r.res.end(body);
    // A body the operation does not read (Create File, Set File Properties...) is read and dropped.
    r.req.resume();
  }

  private fail(req: IncomingMessage, res: ServerResponse, requestId: string, err: unknown): void {
    const error = err instanceof FakeError ? err : new FakeError(500, 'InternalError', `The server encountered an internal error: ${(err as Error)?.message ?? err}`);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.setHeader('x-ms-error-code', error.code);
    const body = req.method === 'HEAD' ? '' : errorXml(error, requestId, new Date());
    res.setHeader('Content-Type', 'application/xml');
    res.setHeader('Content-Length', String(Buffer.byteLength(body)));
    res.writeHead(error.status);
    res.end(body);
    req.resume();
  }
}

function shareNotFound(): FakeError {
  return new FakeError(404, 'ShareNotFound', 'The specified share does not exist.');
}

function notFound(): FakeError {
  return new FakeError(404, 'ResourceNotFound', 'The specified resource does not exist.');
}

function typeMismatch(): FakeError {
  return new FakeError(409, 'ResourceTypeMismatch', 'The specified resource type does not match the type of the existing resource.');
}

function missingHeader(name: string): FakeError {
  return new FakeError(400, 'MissingRequiredHeader', "An HTTP header that's mandatory for this request is not specified.", { HeaderName: name });
}

function invalidHeader(name: string, value: string): FakeError {
  return new FakeError(400, 'InvalidHeaderValue', 'The value for one of the HTTP headers is not in the correct format.', { HeaderName: name, HeaderValue: value });
}

/** A byte count header: a non-negative integer up to 4 TiB; `required` makes its absence MissingRequiredHeader. */
function lengthHeader(r: Request, name: string, required: boolean): number | undefined {
  const text = single(r.req.headers[name]);
  if (text === undefined) {
    if (required) throw missingHeader(name);
    return undefined;
  }
  if (!/^\d+$/.test(text)) throw invalidHeader(name, text);
  const n = Number(text);
  if (n > MAX_FILE_BYTES) throw new FakeError(400, 'OutOfRangeInput', 'One of the request inputs is out of range.', { HeaderName: name });
  return n;
}

function httpProperties(req: IncomingMessage): FileProperties {
  const h = (name: string) => single(req.headers[name]);
  return {
    contentMd5: h('x-ms-content-md5'),
    contentType: h('x-ms-content-type'),
    contentEncoding: h('x-ms-content-encoding'),
    contentLanguage: h('x-ms-content-language'),
    contentDisposition: h('x-ms-content-disposition'),
    cacheControl: h('x-ms-cache-control'),
  };
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function decodePart(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new FakeError(400, 'InvalidUri', 'The requested URI does not represent any resource on the server.');
  }
}

/** The headers every answer about a file or directory carries: ETag, Last-Modified, file id and times. */
function nodeHeaders(res: ServerResponse, node: Node): void {
  res.setHeader('ETag', node.etag);
  res.setHeader('Last-Modified', node.mtime.toUTCString());
  res.setHeader('x-ms-file-id', node.fileId);
  res.setHeader('x-ms-file-attributes', node.kind === 'directory' ? 'Directory' : 'Archive');
  res.setHeader('x-ms-file-creation-time', isoTime(node.birthtime));
  res.setHeader('x-ms-file-last-write-time', isoTime(node.mtime));
  res.setHeader('x-ms-file-change-time', isoTime(node.mtime));
  res.setHeader('x-ms-file-permission-key', '1*1');
}

/** An ISO 8601 UTC time with up to 7 fractional digits (the service's format), to the millisecond; null if malformed. */
function parseIsoTime(text: string): Date | null {
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,7}))?Z$/.exec(text);
  if (!m) return null;
  const time = new Date(`${m[1]}.${(m[2] ?? '').padEnd(3, '0').slice(0, 3)}Z`);
  return Number.isNaN(time.getTime()) ? null : time;
}

/** The service's date-time format in listings and x-ms-file-*-time: ISO 8601 with 7 fractional digits. */
function isoTime(d: Date): string {
  return d.toISOString().replace('Z', '0000Z');
}

/** Markers are opaque to clients: the last name of the page, base64url with a version tag. */
function makeMarker(name: string): string {
  return `1!${Buffer.from(name, 'utf8').toString('base64url')}`;
}

function markerName(marker: string): string | null {
  return marker.startsWith('1!') ? Buffer.from(marker.slice(2), 'base64url').toString('utf8') : null;
}

/** `count` zero bytes, 64 KiB at a time. */
async function* zeros(count: number): AsyncGenerator<Buffer> {
  const block = Buffer.alloc(64 * 1024);
  for (let left = count; left > 0; left -= block.length) yield left >= block.length ? block : block.subarray(0, left);
}

import { randomBytes, randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { open, rm, truncate } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { FakeAuthority, type FakeApp } from './graph-fake.auth.js';
import { DRIVE_ID, DriveStore } from './graph-fake.store.js';

export interface GraphFakeOptions {
  app: FakeApp;
  /** The drive's root folder on disk. */
  root: string;
  /** Where uploads are staged until complete (outside the root: an upload is invisible until it completes). */
  stagingDir: string;
  /** PEM certificate and key the fake serves HTTPS with. */
  cert: string;
  key: string;
}

/** Documented limits (Graph "Upload or replace the contents of a driveItem", "Upload large files with an upload session"). */
const SIMPLE_UPLOAD_MAX_BYTES = 250 * 1024 * 1024;
const FRAGMENT_UNIT_BYTES = 320 * 1024;
const FRAGMENT_MAX_BYTES = 60 * 1024 * 1024;
const DEFAULT_PAGE = 200;
const MAX_PAGE = 1000;
const SESSION_MS = 15 * 60_000;

interface UploadSession {
  id: string;
  rel: string;
  replace: boolean;
  staging: string;
  received: number;
  total?: number;
  expires: number;
  busy: boolean;
}

/**
 * A `copy` action in progress (Graph "driveItem: copy", "Working with long running actions"): the
 * bytes are copied in the background into staging, then the item appears under its name at once.
 */
interface CopyJob {
  status: 'notStarted' | 'inProgress' | 'completed' | 'failed';
  /** Monitor polls answered so far: the first one always reports the job still running. */
  polls: number;
  bytes: number;
  copied: number;
  resourceId?: string;
  error?: { code: string; message: string };
}

/**
 * What the next copies do, injected by a test (`/_fake/copy-faults`): `fail` stops half-way, leaves
 * the half-copied item under the target name (Microsoft does not document what a failed copy leaves:
 * the fake leaves the worst) and reports `failed`; `corrupt` completes with one byte flipped (what a
 * copy of another version than the client checked looks like).
 */
interface CopyFault {
  mode: 'fail' | 'corrupt';
  remaining: number;
}

/** One request the fake answered (`/_fake/requests`): what a test reads to show which requests the client made. */
interface LoggedRequest {
  seq: number;
  method: string;
  path: string;
  /** Whether an Authorization header came with it (a pre-authenticated or monitor URL must get none). */
  authorization: boolean;
}

/** Requests kept in the log (the oldest go first). */
const MAX_LOGGED = 10_000;

/** A fault the admin endpoint injected: the next `remaining` matching requests get `status` with Retry-After. */
interface Fault {
  status: number;
  remaining: number;
  retryAfter?: string;
  match?: string;
}

class HttpError extends Error {
  constructor(readonly status: number, readonly code: string, message: string, readonly headers: Record<string, string> = {}) {
    super(message);
  }
}

/**
 * A FAKE of Microsoft Graph's drive API and of the Microsoft identity platform's token endpoint,
 * for tests (no emulator of either exists). One HTTPS server on 127.0.0.1 serves:
 * - POST /{tenant}/oauth2/v2.0/token (refresh-token grant, rotating refresh tokens);
 * - /v1.0/me/drive and /v1.0/drives/{id}: items addressed by path (`root:/a/b:`) or id, GET item,
 *   children with $top and @odata.nextLink, POST children (folders), PUT content (simple upload),
 *   createUploadSession, GET content (302 to a pre-authenticated download URL with Range), PATCH
 *   (rename/move with conflictBehavior), DELETE;
 * - the pre-authenticated upload URLs (Content-Range fragments, multiples of 320 KiB but the
 *   last, 202 with nextExpectedRanges, 201/200 with the driveItem at the end, 416 for a fragment
 *   that is not the next expected, DELETE to cancel) and download URLs;
 * - POST items/{id}/copy (or by path): 202 with a monitor URL in Location; the copy runs in the
 *   background (parentReference by id or path, a new name, conflictBehavior fail/replace/rename);
 *   the monitor URL (`/_monitor/{id}`, no token: the fake refuses one) answers asyncJobStatus,
 *   `inProgress` at the first poll, then `completed` with the new item's resourceId, or `failed`;
 * - /_fake/*: the test's controls (inject 429/503 with Retry-After, mint or revoke tokens, counters,
 *   copy faults, the monitor URLs' origin, the request log).
 * Shapes follow Microsoft's documentation: driveItem JSON, `{error: {code, message, innerError}}`.
 * Files live on disk under `root` and are streamed in and out, never buffered whole.
 */
export class GraphFake {
  private readonly server: Server;
  private readonly store: DriveStore;
  readonly authority: FakeAuthority;
  private readonly sessions = new Map<string, UploadSession>();
  private readonly downloads = new Map<string, { rel: string; expires: number }>();
  private faults: Fault[] = [];
  private readonly copies = new Map<string, CopyJob>();
  private copyFaults: CopyFault[] = [];
  /** The origin monitor URLs are given on (a test points them elsewhere); the fake's own by default. */
  private monitorOrigin: string | null = null;
  private readonly log: LoggedRequest[] = [];
  private logged = 0;
  private throttled = 0;
  /** Upload-session fragments accepted. */
  private fragments = 0;
  private origin = '';

  constructor(private readonly options: GraphFakeOptions) {
    this.store = new DriveStore(options.root);
    this.authority = new FakeAuthority(options.app);
    this.server = createServer({ cert: options.cert, key: options.key, keepAlive: true }, (req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        if (res.headersSent) res.destroy();
        else if (err instanceof HttpError) this.error(res, err);
        else this.error(res, new HttpError(500, 'generalException', `the fake failed: ${(err as Error).message}`));
      });
    });
  }

  async listen(port: number): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => resolve());
    });
    const bound = (this.server.address() as { port: number }).port;
    this.origin = `https://127.0.0.1:${bound}`;
    return bound;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.origin);
    const path = url.pathname;
    if (path.startsWith('/_fake/')) return this.admin(req, res, path.slice('/_fake/'.length), url);
    this.log.push({ seq: ++this.logged, method: req.method ?? 'GET', path, authorization: req.headers.authorization !== undefined });
    if (this.log.length > MAX_LOGGED) this.log.shift();
    this.injectFault(req);
    const token = /^\/([^/]+)\/oauth2\/v2\.0\/token$/.exec(path);
    if (token && req.method === 'POST') {
      const reply = this.authority.grant(decodeURIComponent(token[1]!), new URLSearchParams(await readBody(req)));
      return this.json(res, reply.status, reply.body);
    }
    if (path.startsWith('/_upload/')) return this.fragment(req, res, path.slice('/_upload/'.length));
    if (path.startsWith('/_download/')) return this.download(req, res, path.slice('/_download/'.length));
    if (path.startsWith('/_monitor/')) return this.monitor(req, res, path.slice('/_monitor/'.length));
    const drive = /^\/v1\.0\/(?:me\/drive|drives\/([^/]+))(\/.*)?$/.exec(path);
    if (!drive) throw new HttpError(400, 'BadRequest', `Resource not found for the segment '${path.split('/')[2] ?? ''}'.`);
    const auth = this.authority.validAccessToken(req.headers.authorization);
    if (auth === 'missing') throw new HttpError(401, 'InvalidAuthenticationToken', 'Access token is empty.');
    if (auth === 'invalid') throw new HttpError(401, 'InvalidAuthenticationToken', 'Lifetime validation failed, the token is expired.');
    if (drive[1] !== undefined && decodeURIComponent(drive[1]) !== DRIVE_ID) throw new HttpError(404, 'itemNotFound', 'The resource could not be found.');
    const prefix = path.slice(0, path.length - (drive[2]?.length ?? 0));
    const { rel, suffix } = this.address(drive[2] ?? '');
    return this.driveRequest(req, res, url, prefix, rel, suffix);
  }

  /** `/root`, `/root:/a/b:`, `/root:/a/b:/children`, `/items/{id}/content`, ... → the item's path and what follows. */
  private address(rest: string): { rel: string; suffix: string } {
    let rel: string;
    let suffix: string;
    if (rest.startsWith('/root:')) {
      const after = rest.slice('/root:'.length);
      const colon = after.indexOf(':');
      rel = colon < 0 ? after : after.slice(0, colon);
      suffix = colon < 0 ? '' : after.slice(colon + 1);
    } else if (rest === '/root' || rest.startsWith('/root/')) {
      rel = '';
      suffix = rest.slice('/root'.length);
    } else {
      const byId = /^\/items\/([^/]+)(\/.*)?$/.exec(rest);
      const found = byId ? this.store.pathOf(decodeURIComponent(byId[1]!)) : undefined;
      if (found === undefined) throw new HttpError(404, 'itemNotFound', 'The resource could not be found.');
      return { rel: found, suffix: byId![2] ?? '' };
    }
    const segments = rel.split('/').filter((s) => s !== '').map((s) => decodeURIComponent(s));
    if (segments.some((s) => s === '.' || s === '..' || s.includes('/') || s.includes('\\') || /[\u0000-\u001f]/.test(s))) {
      throw new HttpError(400, 'invalidRequest', 'The path is not valid.');
    }
    return { rel: segments.join('/'), suffix };
  }

  private async driveRequest(req: IncomingMessage, res: ServerResponse, url: URL, prefix: string, rel: string, suffix: string): Promise<void> {
    const method = req.method ?? 'GET';
    const conflict = url.searchParams.get('@microsoft.graph.conflictBehavior');
    if (suffix === '' && method === 'GET') return this.json(res, 200, await this.itemOr404(rel, true));
    if (suffix === '' && method === 'DELETE') return this.deleteItem(res, rel);
    if (suffix === '' && method === 'PATCH') return this.patch(req, res, rel, conflict);
    if (suffix === '/children' && method === 'GET') return this.children(res, url, prefix, rel);
    if (suffix === '/children' && method === 'POST') return this.createFolder(req, res, rel);
    if (suffix === '/content' && method === 'GET') return this.contentRedirect(res, rel);
    if (suffix === '/content' && method === 'PUT') return this.simpleUpload(req, res, rel, conflict ?? 'replace');
    if (suffix === '/createUploadSession' && method === 'POST') return this.createSession(req, res, rel);
    if (suffix === '/copy' && method === 'POST') return this.copy(req, res, rel, conflict);
    throw new HttpError(405, 'invalidRequest', `${method} is not supported on this resource by the fake.`);
  }

  private async itemOr404(rel: string, withDownloadUrl = false) {
    const st = await this.store.stat(rel);
    if (!st || (!st.isFile() && !st.isDirectory())) throw new HttpError(404, 'itemNotFound', 'The resource could not be found.');
    return this.store.item(rel, st, withDownloadUrl && st.isFile() ? this.downloadUrl(rel) : undefined);
  }

  private async children(res: ServerResponse, url: URL, prefix: string, rel: string): Promise<void> {
    const st = await this.store.stat(rel);
    if (!st) throw new HttpError(404, 'itemNotFound', 'The resource could not be found.');
    const top = Math.min(Math.max(Number(url.searchParams.get('$top') ?? DEFAULT_PAGE) || DEFAULT_PAGE, 1), MAX_PAGE);
    const after = url.searchParams.get('$skiptoken');
    const afterName = after ? Buffer.from(after, 'base64url').toString('utf8') : null;
    const names = st.isDirectory() ? await this.store.children(rel) : [];
    const rest = afterName === null ? names : names.filter((n) => n > afterName);
    const page = rest.slice(0, top);
    const value = [];
    for (const name of page) {
      const child = rel ? `${rel}/${name}` : name;
      const cst = await this.store.stat(child);
      if (cst && (cst.isFile() || cst.isDirectory())) value.push(await this.store.item(child, cst, cst.isFile() ? this.downloadUrl(child) : undefined));
    }
    const body: Record<string, unknown> = { '@odata.context': `${this.origin}/v1.0/$metadata#Collection(driveItem)`, value };
    if (rest.length > top) {
      const next = new URL(`${this.origin}${prefix}${rel ? `/root:/${rel.split('/').map(encodeURIComponent).join('/')}:` : '/root'}/children`);
      next.searchParams.set('$top', String(top));
      next.searchParams.set('$skiptoken', Buffer.from(page[page.length - 1]!, 'utf8').toString('base64url'));
      body['@odata.nextLink'] = next.href;
    }
    this.json(res, 200, body);
  }

  private async createFolder(req: IncomingMessage, res: ServerResponse, parent: string): Promise<void> {
    const body = JSON.parse((await readBody(req)) || '{}') as { name?: unknown; folder?: unknown; '@microsoft.graph.conflictBehavior'?: string };
    const pst = await this.store.stat(parent);
    if (!pst) throw new HttpError(404, 'itemNotFound', 'The resource could not be found.');
    if (!pst.isDirectory()) throw new HttpError(400, 'invalidRequest', 'The parent item is not a folder.');
    const name = body.name;
    if (typeof name !== 'string' || !validName(name)) throw new HttpError(400, 'invalidRequest', 'The name in the request is invalid.');
    if (typeof body.folder !== 'object' || body.folder === null) throw new HttpError(400, 'invalidRequest', 'The fake creates folders only: a folder facet is required.');
    const rel = parent ? `${parent}/${name}` : name;
    const behavior = body['@microsoft.graph.conflictBehavior'] ?? 'fail';
    if (await this.store.stat(rel)) {
      if (behavior !== 'replace') throw new HttpError(409, 'nameAlreadyExists', `The specified item name already exists. Name: ${name}`);
      await this.store.remove(rel);
    }
    await this.store.mkdirs(rel);
    this.json(res, 201, await this.itemOr404(rel));
  }

  private async deleteItem(res: ServerResponse, rel: string): Promise<void> {
    if (rel === '') throw new HttpError(403, 'accessDenied', 'The root of a drive cannot be deleted.');
    if (!(await this.store.stat(rel))) throw new HttpError(404, 'itemNotFound', 'The resource could not be found.');
    await this.store.remove(rel);
    res.writeHead(204).end();
  }

  private async patch(req: IncomingMessage, res: ServerResponse, rel: string, conflict: string | null): Promise<void> {
    const body = JSON.parse((await readBody(req)) || '{}') as { name?: unknown; parentReference?: { id?: string; path?: string }; fileSystemInfo?: { lastModifiedDateTime?: unknown }; '@microsoft.graph.conflictBehavior'?: string };
    if (rel === '') throw new HttpError(400, 'invalidRequest', 'The root cannot be moved or renamed.');
    if (!(await this.store.stat(rel))) throw new HttpError(404, 'itemNotFound', 'The resource could not be found.');
    const modified = body.fileSystemInfo?.lastModifiedDateTime;
    if (modified !== undefined) {
      const time = typeof modified === 'string' ? new Date(modified) : null;
      if (!time || Number.isNaN(time.getTime())) throw new HttpError(400, 'invalidRequest', 'fileSystemInfo.lastModifiedDateTime is not a date.');
      // Graph keeps whole seconds of a client's time.
      await this.store.setModifiedAt(rel, new Date(Math.floor(time.getTime() / 1000) * 1000));
    }
    const name = body.name === undefined ? rel.slice(rel.lastIndexOf('/') + 1) : body.name;
    if (typeof name !== 'string' || !validName(name)) throw new HttpError(400, 'invalidRequest', 'The name in the request is invalid.');
    const parent = await this.parentFolder(body.parentReference, rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : '');
    const target = parent ? `${parent}/${name}` : name;
    if (target === rel) return this.json(res, 200, await this.itemOr404(rel));
    if (target.startsWith(`${rel}/`)) throw new HttpError(400, 'invalidRequest', 'An item cannot be moved into itself.');
    const behavior = conflict ?? body['@microsoft.graph.conflictBehavior'] ?? 'fail';
    if (await this.store.stat(target)) {
      if (behavior !== 'replace') throw new HttpError(409, 'nameAlreadyExists', `The specified item name already exists. Name: ${name}`);
      await this.store.remove(target);
    }
    await this.store.move(rel, target);
    this.json(res, 200, await this.itemOr404(target));
  }

  /** The folder a parentReference names (by id, else by path), `fallback` without one; 404 unless it is a folder. */
  private async parentFolder(ref: { driveId?: string; id?: string; path?: string } | undefined, fallback: string): Promise<string> {
    let parent = fallback;
    if (ref?.driveId !== undefined && ref.driveId !== DRIVE_ID) throw new HttpError(400, 'invalidRequest', 'The fake has one drive: parentReference.driveId names another.');
    if (ref?.id !== undefined) {
      const found = this.store.pathOf(ref.id);
      if (found === undefined) throw new HttpError(404, 'itemNotFound', 'The parent item could not be found.');
      parent = found;
    } else if (ref?.path !== undefined) {
      const match = /^\/drives?(?:\/[^/]+)?\/root:(.*)$/.exec(ref.path);
      if (!match) throw new HttpError(400, 'invalidRequest', 'parentReference.path is not a drive path.');
      parent = match[1]!.split('/').filter((s) => s !== '').map(decodeURIComponent).join('/');
    }
    const pst = await this.store.stat(parent);
    if (!pst?.isDirectory()) throw new HttpError(404, 'itemNotFound', 'The parent item could not be found.');
    return parent;
  }

  /**
   * POST …/copy: checks what can be checked at once (the source, the parent, the name, a name taken
   * with conflictBehavior fail: 409), answers 202 with the monitor URL, and copies in the background
   * into staging; the new item appears whole under its name when the bytes are in. Files only.
   */
  private async copy(req: IncomingMessage, res: ServerResponse, rel: string, conflict: string | null): Promise<void> {
    const body = JSON.parse((await readBody(req)) || '{}') as { parentReference?: { driveId?: string; id?: string; path?: string }; name?: unknown; '@microsoft.graph.conflictBehavior'?: string };
    const st = await this.store.stat(rel);
    if (!st) throw new HttpError(404, 'itemNotFound', 'The resource could not be found.');
    if (!st.isFile()) throw new HttpError(400, 'invalidRequest', 'The fake copies files only.');
    const parent = await this.parentFolder(body.parentReference, rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : '');
    const name = body.name === undefined ? rel.slice(rel.lastIndexOf('/') + 1) : body.name;
    if (typeof name !== 'string' || !validName(name)) throw new HttpError(400, 'invalidRequest', 'The name in the request is invalid.');
    const behavior = conflict ?? body['@microsoft.graph.conflictBehavior'] ?? 'fail';
    if (!['fail', 'replace', 'rename'].includes(behavior)) throw new HttpError(400, 'invalidRequest', `Unknown conflictBehavior ${behavior}.`);
    const target = parent ? `${parent}/${name}` : name;
    if (behavior === 'fail' && (await this.store.stat(target))) throw new HttpError(409, 'nameAlreadyExists', `The specified item name already exists. Name: ${name}`);
    const id = randomBytes(18).toString('base64url');
    const job: CopyJob = { status: 'notStarted', polls: 0, bytes: st.size, copied: 0 };
    this.copies.set(id, job);
    const fault = this.copyFaults.find((f) => f.remaining > 0);
    if (fault) fault.remaining--;
    void this.runCopy(job, rel, target, behavior, fault?.mode);
    res.writeHead(202, { Location: `${this.monitorOrigin ?? this.origin}/_monitor/${id}`, 'Content-Length': '0' }).end();
  }

  private async runCopy(job: CopyJob, rel: string, target: string, behavior: string, fault: CopyFault['mode'] | undefined): Promise<void> {
    const staging = join(this.options.stagingDir, `copy-${randomUUID()}`);
    try {
      job.status = 'inProgress';
      // A failing copy gets half the bytes (at least the first one), the others all of them.
      const source = createReadStream(this.store.abs(rel), fault === 'fail' ? { end: Math.max(0, Math.floor(job.bytes / 2) - 1) } : {});
      source.on('data', (chunk) => (job.copied += chunk.length));
      await pipeline(source, createWriteStream(staging));
      if (fault === 'corrupt' && job.bytes > 0) {
        const file = await open(staging, 'r+');
        try {
          const byte = Buffer.alloc(1);
          await file.read(byte, 0, 1, 0);
          byte[0] = byte[0]! ^ 0x01;
          await file.write(byte, 0, 1, 0);
        } finally {
          await file.close();
        }
      }
      let name = target;
      const existing = await this.store.stat(target);
      if (existing && behavior === 'rename') name = await this.freeName(target);
      else if (existing?.isDirectory() || (existing && behavior !== 'replace')) throw new HttpError(409, 'nameAlreadyExists', 'The specified item name already exists.');
      await this.store.moveIn(staging, name);
      if (fault === 'fail') throw new HttpError(500, 'generalException', 'The copy failed part-way (injected by the test).');
      job.resourceId = this.store.idOf(name);
      job.status = 'completed';
    } catch (err) {
      job.status = 'failed';
      job.error = err instanceof HttpError ? { code: err.code, message: err.message } : { code: 'generalException', message: (err as Error).message };
    } finally {
      await rm(staging, { force: true });
    }
  }

  /** `name 1.ext`, `name 2.ext`, …: the first free name beside `target` (conflictBehavior rename). */
  private async freeName(target: string): Promise<string> {
    const dot = target.lastIndexOf('.');
    const stem = dot > target.lastIndexOf('/') + 1 ? target.slice(0, dot) : target;
    const ext = target.slice(stem.length);
    for (let n = 1; ; n++) {
      const name = `${stem} ${n}${ext}`;
      if (!(await this.store.stat(name))) return name;
    }
  }

  /** A monitor URL: asyncJobStatus, 202 while the copy runs and once it completed (as the documentation shows), 200 once it failed. */
  private monitor(req: IncomingMessage, res: ServerResponse, id: string): void {
    const job = this.copies.get(id);
    if (!job) throw new HttpError(404, 'itemNotFound', 'The monitor URL is not valid or has expired.');
    if (req.method !== 'GET') throw new HttpError(405, 'invalidRequest', 'Monitor URLs accept GET.');
    // Stricter than Graph, as for download URLs: the monitor needs no token, and may be on another host.
    if (req.headers.authorization) throw new HttpError(400, 'invalidRequest', 'The FAKE refuses an Authorization header on a monitor URL.');
    const first = job.polls++ === 0;
    const percentageComplete = job.bytes === 0 ? 100 : Math.round((job.copied / job.bytes) * 1000) / 10;
    if (first || job.status === 'notStarted' || job.status === 'inProgress') {
      return this.json(res, 202, { operation: 'ItemCopy', status: job.status === 'notStarted' ? 'notStarted' : 'inProgress', percentageComplete: first ? Math.min(percentageComplete, 99.9) : percentageComplete });
    }
    if (job.status === 'failed') return this.json(res, 200, { operation: 'ItemCopy', status: 'failed', percentageComplete, error: job.error });
    this.json(res, 202, { operation: 'ItemCopy', percentageComplete: 100, resourceId: job.resourceId, status: 'completed' });
  }

  private downloadUrl(rel: string): string {
    const token = randomBytes(24).toString('base64url');
    this.downloads.set(token, { rel, expires: Date.now() + 60 * 60_000 });
    return `${this.origin}/_download/${token}`;
  }

  private async contentRedirect(res: ServerResponse, rel: string): Promise<void> {
    const st = await this.store.stat(rel);
    if (!st?.isFile()) throw new HttpError(404, 'itemNotFound', 'The resource could not be found.');
    res.writeHead(302, { Location: this.downloadUrl(rel), 'Content-Length': '0' }).end();
  }

  /** A pre-authenticated download URL: no token needed, Range honoured (206, or 416 past the end). */
  private async download(req: IncomingMessage, res: ServerResponse, token: string): Promise<void> {
    const entry = this.downloads.get(token);
    if (!entry || entry.expires < Date.now()) throw new HttpError(401, 'unauthenticated', 'The download URL is not valid or has expired.');
    // Stricter than Graph, on purpose: the URL is pre-authenticated, and a client that sends its
    // access token here would send it to whatever host Graph names (in production another host).
    if (req.headers.authorization) throw new HttpError(400, 'invalidRequest', 'The FAKE refuses an Authorization header on a pre-authenticated download URL.');
    const st = await this.store.stat(entry.rel);
    if (!st?.isFile()) throw new HttpError(404, 'itemNotFound', 'The resource could not be found.');
    const range = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range ?? '');
    let start = 0;
    let end = st.size - 1;
    let status = 200;
    if (range && (range[1] !== '' || range[2] !== '')) {
      if (range[1] === '') {
        start = Math.max(0, st.size - Number(range[2]));
      } else {
        start = Number(range[1]);
        if (range[2] !== '') end = Math.min(end, Number(range[2]));
      }
      if (start >= st.size || start > end) {
        res.writeHead(416, { 'Content-Range': `bytes */${st.size}`, 'Content-Length': '0' }).end();
        return;
      }
      status = 206;
    }
    const length = st.size === 0 ? 0 : end - start + 1;
    res.writeHead(status, {
      'Content-Type': 'application/octet-stream', 'Content-Length': String(length), 'Accept-Ranges': 'bytes',
      ...(status === 206 ? { 'Content-Range': `bytes ${start}-${end}/${st.size}` } : {}),
    });
    if (length === 0) return void res.end();
    await pipeline(createReadStream(this.store.abs(entry.rel), { start, end }), res).catch(() => res.destroy());
  }

  /** Where a complete upload lands: parents created as Graph does for path-addressed uploads; a folder in the way is a conflict. */
  private async place(staging: string, rel: string, replace: boolean): Promise<boolean> {
    const parent = rel.includes('/') ? rel.slice(0, rel.lastIndexOf('/')) : '';
    if (!(await this.store.mkdirs(parent))) throw new HttpError(409, 'nameAlreadyExists', 'A file is in the way of the parent folder.');
    const existing = await this.store.stat(rel);
    if (existing?.isDirectory()) throw new HttpError(409, 'nameAlreadyExists', 'A folder with this name already exists.');
    if (existing && !replace) throw new HttpError(409, 'nameAlreadyExists', 'The specified item name already exists.');
    await this.store.moveIn(staging, rel);
    return existing !== null;
  }

  private async simpleUpload(req: IncomingMessage, res: ServerResponse, rel: string, conflict: string): Promise<void> {
    if (rel === '') throw new HttpError(400, 'invalidRequest', 'The root has no content.');
    const length = Number(req.headers['content-length'] ?? NaN);
    if (!Number.isFinite(length)) throw new HttpError(411, 'invalidRequest', 'The size of the provided stream is not known. Make sure the request is not chunked, and the Content-Length header is specified.');
    if (length > SIMPLE_UPLOAD_MAX_BYTES) throw new HttpError(413, 'requestTooLarge', 'A simple upload is limited to 250 MB; use an upload session.');
    const staging = join(this.options.stagingDir, randomUUID());
    try {
      let received = 0;
      req.on('data', (chunk: Buffer) => (received += chunk.length));
      await pipeline(req, createWriteStream(staging));
      if (received !== length) throw new HttpError(400, 'invalidRequest', 'The request body is shorter than its Content-Length.');
      const replaced = await this.place(staging, rel, conflict === 'replace');
      this.json(res, replaced ? 200 : 201, await this.itemOr404(rel));
    } finally {
      await rm(staging, { force: true });
    }
  }

  private async createSession(req: IncomingMessage, res: ServerResponse, rel: string): Promise<void> {
    const body = JSON.parse((await readBody(req)) || '{}') as { item?: { '@microsoft.graph.conflictBehavior'?: string } };
    if (rel === '') throw new HttpError(400, 'invalidRequest', 'The root has no content.');
    const behavior = body.item?.['@microsoft.graph.conflictBehavior'] ?? 'replace';
    const existing = await this.store.stat(rel);
    if (existing?.isDirectory() || (existing && behavior === 'fail')) throw new HttpError(409, 'nameAlreadyExists', 'The specified item name already exists.');
    const id = randomBytes(24).toString('base64url');
    const staging = join(this.options.stagingDir, `session-${id}`);
    await (await open(staging, 'w')).close();
    const session: UploadSession = { id, rel, replace: behavior === 'replace', staging, received: 0, expires: Date.now() + SESSION_MS, busy: false };
    this.sessions.set(id, session);
    this.json(res, 200, { uploadUrl: `${this.origin}/_upload/${id}`, expirationDateTime: new Date(session.expires).toISOString(), nextExpectedRanges: ['0-'] });
  }

  /** PUT/GET/DELETE on an upload URL: fragments in order, each a multiple of 320 KiB but the last. */
  private async fragment(req: IncomingMessage, res: ServerResponse, id: string): Promise<void> {
    const session = this.sessions.get(id);
    if (!session || session.expires < Date.now()) throw new HttpError(404, 'itemNotFound', 'The upload session was not found or has expired.');
    const status = () => ({ expirationDateTime: new Date(session.expires).toISOString(), nextExpectedRanges: [`${session.received}-`] });
    if (req.method === 'GET') return this.json(res, 200, status());
    if (req.method === 'DELETE') {
      this.sessions.delete(id);
      await rm(session.staging, { force: true });
      res.writeHead(204).end();
      return;
    }
    if (req.method !== 'PUT') throw new HttpError(405, 'invalidRequest', 'Upload URLs accept PUT, GET and DELETE.');
    // The upload URL is pre-authenticated; the documentation warns that an Authorization header can fail the request.
    if (req.headers.authorization) throw new HttpError(401, 'unauthenticated', 'Do not send an Authorization header to the upload URL.');
    const range = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(req.headers['content-range'] ?? '');
    if (!range) throw new HttpError(400, 'invalidRequest', 'The Content-Range header is missing or malformed.');
    const [start, end, total] = [Number(range[1]), Number(range[2]), Number(range[3])];
    const length = end - start + 1;
    if (Number(req.headers['content-length']) !== length) throw new HttpError(400, 'invalidRequest', 'The Content-Range header length does not match the provided number of bytes.');
    if (session.total !== undefined && session.total !== total) throw new HttpError(400, 'invalidRequest', 'Declared total size for the file does not match the size declared before.');
    if (end >= total || length <= 0) throw new HttpError(400, 'invalidRequest', 'The Content-Range is outside the declared total size.');
    if (start !== session.received || session.busy) {
      throw new HttpError(416, 'invalidRange', `The uploaded fragment overlaps with data that has already been received or is not the next expected range (${session.received}-).`);
    }
    if (length > FRAGMENT_MAX_BYTES) throw new HttpError(413, 'requestTooLarge', 'A fragment must be smaller than 60 MiB.');
    if (end !== total - 1 && length % FRAGMENT_UNIT_BYTES !== 0) throw new HttpError(400, 'invalidRequest', 'The fragment size must be a multiple of 320 KiB (327,680 bytes), except for the last fragment.');
    session.total = total;
    session.busy = true;
    try {
      let received = 0;
      req.on('data', (chunk: Buffer) => (received += chunk.length));
      const ok = await pipeline(req, createWriteStream(session.staging, { flags: 'r+', start })).then(() => received === length, () => false);
      if (!ok) {
        // A cut fragment: nothing of it counts.
        await truncate(session.staging, session.received);
        if (!res.destroyed) throw new HttpError(400, 'invalidRequest', 'The fragment ended before its Content-Length.');
        return;
      }
      session.received = end + 1;
      this.fragments++;
    } finally {
      session.busy = false;
    }
    if (session.received < total) return this.json(res, 202, status());
    this.sessions.delete(id);
    try {
      const replaced = await this.place(session.staging, session.rel, session.replace);
      this.json(res, replaced ? 200 : 201, await this.itemOr404(session.rel));
    } finally {
      await rm(session.staging, { force: true });
    }
  }

  /** A 429/503 the test injected, with its Retry-After. */
  private injectFault(req: IncomingMessage): void {
    let target = req.url ?? '';
    try {
      target = decodeURIComponent(target);
    } catch {
      // Matched as sent.
    }
    const fault = this.faults.find((f) => f.remaining > 0 && (!f.match || target.includes(f.match)));
    if (!fault) return;
    fault.remaining--;
    this.throttled++;
    const headers: Record<string, string> = fault.retryAfter !== undefined ? { 'Retry-After': fault.retryAfter } : {};
    if (fault.status === 429) throw new HttpError(429, 'activityLimitReached', 'The request has been throttled.', headers);
    throw new HttpError(fault.status, 'serviceNotAvailable', 'The service is temporarily unavailable.', headers);
  }

  private async admin(req: IncomingMessage, res: ServerResponse, what: string, url: URL): Promise<void> {
    const body = req.method === 'POST' ? JSON.parse((await readBody(req)) || '{}') as Record<string, unknown> : {};
    if (what === 'faults' && req.method === 'POST') {
      this.faults.push({
        status: Number(body.status ?? 429), remaining: Number(body.count ?? 1),
        ...(body.retryAfter !== undefined ? { retryAfter: String(body.retryAfter) } : {}),
        ...(typeof body.match === 'string' ? { match: body.match } : {}),
      });
      return void res.writeHead(204).end();
    }
    if (what === 'faults' && req.method === 'DELETE') {
      this.faults = [];
      return void res.writeHead(204).end();
    }
    if (what === 'refresh-tokens' && req.method === 'POST') return this.json(res, 200, { refresh_token: this.authority.mintRefreshToken(body.single_use === true) });
    if (what === 'revoke-refresh-token' && req.method === 'POST') {
      this.authority.revokeRefreshToken(String(body.refresh_token ?? ''));
      return void res.writeHead(204).end();
    }
    if (what === 'revoke-access-tokens' && req.method === 'POST') {
      this.authority.revokeAccessTokens();
      return void res.writeHead(204).end();
    }
    if (what === 'copy-faults' && req.method === 'POST') {
      if (body.mode !== 'fail' && body.mode !== 'corrupt') throw new HttpError(400, 'invalidRequest', 'mode is fail or corrupt');
      this.copyFaults.push({ mode: body.mode, remaining: Number(body.count ?? 1) });
      return void res.writeHead(204).end();
    }
    if (what === 'monitor-origin' && req.method === 'POST') {
      this.monitorOrigin = typeof body.origin === 'string' && body.origin !== '' ? body.origin : null;
      return void res.writeHead(204).end();
    }
    if (what === 'requests' && req.method === 'GET') {
      // `?since=N`: the requests after the one numbered N (`last` is the newest number, for the next call).
      const since = Number(url.searchParams.get('since') ?? 0);
      return this.json(res, 200, { last: this.logged, requests: this.log.filter((r) => r.seq > since) });
    }
    if (what === 'stats' && req.method === 'GET') {
      // Counters of the whole fake; open sessions below a folder (`?under=a/b`), so parallel tests do not see each other's.
      const under = url.searchParams.get('under') ?? '';
      const open = [...this.sessions.values()].filter((x) => under === '' || x.rel === under || x.rel.startsWith(`${under}/`)).length;
      return this.json(res, 200, { grants: this.authority.grants, throttled: this.throttled, fragments: this.fragments, open_upload_sessions: open });
    }
    throw new HttpError(404, 'itemNotFound', `no fake control ${what}`);
  }

  private json(res: ServerResponse, status: number, body: unknown): void {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(Buffer.byteLength(text)) }).end(text);
  }

  /** Graph's error body: `{"error": {"code", "message", "innerError": {...}}}`. */
  private error(res: ServerResponse, err: HttpError): void {
    const text = JSON.stringify({
      error: { code: err.code, message: err.message, innerError: { date: new Date().toISOString(), 'request-id': randomUUID(), 'client-request-id': randomUUID() } },
    });
    res.writeHead(err.status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': String(Buffer.byteLength(text)), ...err.headers });
    res.end(text);
  }
}

/** A name Graph accepts for an item (no separators, no control characters, not `.`/`..`). */
function validName(name: string): boolean {
  return name !== '' && name !== '.' && name !== '..' && !/[/\\\u0000-\u001f]/.test(name);
}

const MAX_JSON_BYTES = 1024 * 1024;

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of req) {
    bytes += (chunk as Buffer).length;
    if (bytes > MAX_JSON_BYTES) throw new HttpError(413, 'requestTooLarge', 'The request body is too large.');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

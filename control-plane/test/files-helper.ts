import { randomBytes } from 'node:crypto';
import { request as httpRequest, type ClientRequest } from 'node:http';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { App } from '../src/app.js';
import type { ScannerConfig } from '../src/config.js';
import { auth } from './helper.js';

export { eicar } from '../../e2e/src/tools/eicar.js';
export { EICAR_SIGNATURE } from '../../e2e/src/services/clamd.service.js';

/** Helpers of the files tests (files-upload, files-api). */

/** The test clamd (`XFER_TEST_CLAMD`, host:port, from the test services) as a scanner setting. */
export function testScanner(): ScannerConfig {
  const raw = process.env.XFER_TEST_CLAMD;
  const match = raw ? /^(.+):(\d+)$/.exec(raw) : null;
  if (!match) throw new Error('XFER_TEST_CLAMD (host:port of the test clamd) is not set: run the tests through jest (its global setup starts clamd)');
  return { kind: 'clamd', address: { host: match[1]!, port: Number(match[2]) }, timeoutMs: 10_000 };
}

export interface FormPart {
  name: string;
  /** Present: a file part. */
  filename?: string;
  content: Buffer | string;
  contentType?: string;
}

/** A multipart/form-data body with exactly these parts, in this order. */
export function multipart(parts: FormPart[]): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----xfer${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = `form-data; name="${part.name}"${part.filename !== undefined ? `; filename="${part.filename}"` : ''}`;
    const type = part.contentType ?? (part.filename !== undefined ? 'application/octet-stream' : undefined);
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Disposition: ${disposition}\r\n${type ? `Content-Type: ${type}\r\n` : ''}\r\n`, 'utf8'));
    chunks.push(Buffer.isBuffer(part.content) ? part.content : Buffer.from(part.content, 'utf8'));
    chunks.push(Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { payload: Buffer.concat(chunks), headers: { 'content-type': `multipart/form-data; boundary=${boundary}` } };
}

/** `POST /files/upload` with these parts. */
export function postParts(app: App, apiKey: string, parts: FormPart[]) {
  const { payload, headers } = multipart(parts);
  return app.inject({ method: 'POST', url: '/api/v1/files/upload', headers: { ...auth(apiKey), ...headers }, payload });
}

/** Uploads `content` as `name` into `path` (no path part when undefined). */
export function upload(app: App, apiKey: string, name: string, content: Buffer | string, path?: string) {
  return postParts(app, apiKey, [...(path === undefined ? [] : [{ name: 'path', content: path }]), { name: 'file', filename: name, content }]);
}

/** Uploads and returns the created record (throws unless 201). */
export async function uploaded(app: App, apiKey: string, name: string, content: Buffer | string, path?: string) {
  const res = await upload(app, apiKey, name, content, path);
  if (res.statusCode !== 201) throw new Error(`upload ${name}: ${res.statusCode} ${res.body}`);
  return res.json().data as { id: string; name: string; path: string; size: number; mime_type: string; sha256: string; created_at: string };
}

/** Every file in the app's local file store (temporary and committed), relative to its directory. */
export function storedFiles(app: App): string[] {
  if (app.config.fileStore.kind !== 'local') throw new Error('the files tests use the local store');
  const root = app.config.fileStore.dir;
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else found.push(relative(root, path));
    }
  };
  walk(root);
  return found.sort();
}

/** The account's outbox events of `type`, oldest first. */
export async function eventsOf(app: App, accountId: string, type: string) {
  return app.db.outboxEvents.find({ account_id: accountId, type }).sort({ _id: 1 }).lean();
}

/** The account's audit records of `action`, oldest first. */
export async function auditsOf(app: App, accountId: string, action: string) {
  return app.db.auditEvents.find({ account_id: accountId, action }).sort({ _id: 1 }).lean();
}

/**
 * Starts `POST /files/upload` over a real connection to 127.0.0.1:`port` and sends the head of its
 * file part named `filename`; the caller writes the content (and `end(closing)` to finish). Without
 * a `contentLength` the body goes chunked.
 */
export function openUpload(port: number, apiKey: string, filename: string, contentLength?: number): { req: ClientRequest; closing: string } {
  const boundary = `xfer${randomBytes(6).toString('hex')}`;
  const req = httpRequest({
    host: '127.0.0.1', port, method: 'POST', path: '/api/v1/files/upload',
    headers: {
      ...auth(apiKey), 'content-type': `multipart/form-data; boundary=${boundary}`,
      ...(contentLength === undefined ? {} : { 'content-length': String(contentLength) }),
    },
  });
  req.write(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\nContent-Type: application/octet-stream\r\n\r\n`);
  return { req, closing: `\r\n--${boundary}--\r\n` };
}

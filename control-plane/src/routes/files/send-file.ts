import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Types } from 'mongoose';
import { RangeNotSatisfiableError } from '../../errors.js';

/** What of a file record sending its content needs. */
export interface SendableFile {
  _id: Types.ObjectId | string;
  name: string;
  size: number;
  mime_type: string;
  sha256: string;
  storage_key: string;
  created_at: Date;
}

type ByteRange = { start: number; end: number };

export interface SendOptions {
  /**
   * Called once content is about to be sent (200 or 206; never for a 304, a 416, a HEAD or
   * missing content), before the first byte: where a caller counts, audits and events a
   * download. Throwing answers that error instead, with nothing sent.
   */
  beforeSend?: (status: 200 | 206) => Promise<void>;
}

/**
 * The one byte range a `Range` header asks for (RFC 9110 §14.2), `null` to send the whole file
 * (no header, another unit, a malformed or a multi-range request), or `'unsatisfiable'`.
 * An empty file is always sent whole: it has no byte a range could name.
 */
export function parseRange(header: string | undefined, size: number): ByteRange | null | 'unsatisfiable' {
  if (!header || size === 0) return null;
  const match = /^bytes=[ \t]*(\d*)-(\d*)[ \t]*$/i.exec(header);
  if (!match) return null;
  const [, first, last] = match as unknown as [string, string, string];
  if (first === '') {
    if (last === '') return null;
    const suffix = Number(last);
    if (suffix === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  if (last !== '' && Number(last) < start) return null;
  if (start >= size) return 'unsatisfiable';
  return { start, end: last === '' ? size - 1 : Math.min(Number(last), size - 1) };
}

/** Entity tags of an `If-None-Match` / `If-Range` list, with weakness (`W/`) dropped. */
function etagsOf(header: string): string[] {
  return header.split(',').map((tag) => tag.trim().replace(/^W\//, '')).filter(Boolean);
}

/** RFC 6266 / 8187: `filename*` carries the UTF-8 name, `filename` an ASCII stand-in for old clients. */
export function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

/** True when the client's cached copy is current (`If-None-Match`, else `If-Modified-Since`). */
function notModified(request: FastifyRequest, etag: string, modified: Date): boolean {
  const inm = request.headers['if-none-match'];
  if (inm !== undefined) return inm.trim() === '*' || etagsOf(inm).includes(etag);
  const ims = request.headers['if-modified-since'];
  const since = ims ? Date.parse(ims) : NaN;
  return !Number.isNaN(since) && Math.floor(modified.getTime() / 1000) * 1000 <= since;
}

/** `If-Range`: the range applies only while the file is the one the client has part of (strong match). */
function rangeStillValid(request: FastifyRequest, etag: string, lastModified: string): boolean {
  const ifRange = request.headers['if-range'];
  if (ifRange === undefined) return true;
  const value = [ifRange].flat().join(',').trim();
  if (value.startsWith('"') || value.startsWith('W/')) return value === etag;
  return value === lastModified;
}

/**
 * Streams a stored file as the reply: 200 or 206, Content-Type, Content-Length,
 * Content-Disposition (attachment; RFC 6266 `filename*=` UTF-8 plus an ASCII fallback), ETag
 * (`"<sha256>"`), Accept-Ranges: bytes, Last-Modified (`created_at`; content never changes).
 * One `Range: bytes=a-b | a- | -n` → 206 + Content-Range; unsatisfiable → 416
 * RangeNotSatisfiableError; several ranges or a malformed one → the whole file (200);
 * If-None-Match matching (or, without it, If-Modified-Since not older) → 304; If-Range honoured
 * (strong ETag or the exact Last-Modified date). HEAD gets the same headers and no content read.
 * Missing content in the store → 503 "File content unavailable".
 *
 * Resolves once the reply has been handed to Fastify (headers decided, body streaming);
 * `reply.statusCode` then tells what was sent. Downloads are recorded by the caller in
 * `options.beforeSend`, so that they are written before the client has the file, and never for
 * a 304 or a HEAD.
 */
export async function sendStoredFile(
  app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, file: SendableFile, options: SendOptions = {},
): Promise<FastifyReply> {
  const etag = `"${file.sha256}"`;
  const lastModified = file.created_at.toUTCString();
  reply.headers({
    etag,
    'last-modified': lastModified,
    'accept-ranges': 'bytes',
    'cache-control': 'private, no-cache',
  });
  if (notModified(request, etag, file.created_at)) return reply.code(304).send();

  const asked = rangeStillValid(request, etag, lastModified) ? parseRange(request.headers.range, file.size) : null;
  if (asked === 'unsatisfiable') throw new RangeNotSatisfiableError(`Range ${request.headers.range} is outside the file's ${file.size} bytes`, file.size);
  // The content is opened before any content header is set: a failure is answered as JSON.
  let body: Readable;
  if (request.method === 'HEAD') body = Readable.from([]);
  else body = await app.files.read(file, asked ?? undefined, request.log);
  const status = asked ? 206 : 200;
  if (options.beforeSend && request.method !== 'HEAD') {
    try {
      await options.beforeSend(status);
    } catch (err) {
      body.destroy();
      throw err;
    }
  }
  reply.headers({
    'content-type': file.mime_type,
    'content-disposition': contentDisposition(file.name),
    // The declared type is what was sniffed; a browser must not guess another one, and content
    // opened in a browser anyway (an uploaded .html or .svg) runs no script and loads nothing.
    'x-content-type-options': 'nosniff',
    'content-security-policy': "default-src 'none'; sandbox",
    'content-length': String(asked ? asked.end - asked.start + 1 : file.size),
  });
  if (asked) reply.header('content-range', `bytes ${asked.start}-${asked.end}/${file.size}`);
  return reply.code(status).send(body);
}

import { Types } from 'mongoose';
import { basePathProblem, normalizeBasePath, type FileRecord, type SearchFilesQuery } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { FileDoc } from '../../../models/file.model.js';
import { toObjectId } from '../../../lib/pagination.js';
import { BadRequestError, NotFoundError } from '../../../errors.js';

type AccountId = string | Types.ObjectId;
export type StoredFile = FileDoc & { _id: Types.ObjectId };

/** Longest folder path accepted (characters), and longest file name (UTF-8 bytes, as most file systems). */
export const FOLDER_MAX_LENGTH = 1024;
export const NAME_MAX_BYTES = 255;

const CONTROL = /[\u0000-\u001f\u007f]/;

/** The one read shape of a file: no account, storage key or lower-cased name. */
export function presentFile(doc: StoredFile): FileRecord {
  return {
    id: String(doc._id),
    name: doc.name,
    path: doc.path,
    size: doc.size,
    mime_type: doc.mime_type,
    sha256: doc.sha256,
    created_at: doc.created_at.toISOString(),
    uploaded_by: { type: doc.uploaded_by.type, id: doc.uploaded_by.id ?? null },
    ...(doc.deleted_at ? { deleted_at: doc.deleted_at.toISOString() } : {}),
  };
}

/**
 * A folder as given by a client (`field` names it in the message) in its one spelling: `/` or
 * `/a/b` (`/a//./b/` → `/a/b`). Relative paths, `..` segments, NUL and other control characters
 * and backslashes are 400.
 */
export function normalizeFolder(field: string, path: string): string {
  if (path.length > FOLDER_MAX_LENGTH) throw new BadRequestError(`${field} must be at most ${FOLDER_MAX_LENGTH} characters`);
  const problem = basePathProblem(path);
  if (problem) throw new BadRequestError(`${field} ${problem.replace(/^path /, '')}`);
  const folder = normalizeBasePath(path);
  const long = folder.split('/').find((segment) => Buffer.byteLength(segment) > NAME_MAX_BYTES);
  if (long) throw new BadRequestError(`${field} has a segment longer than ${NAME_MAX_BYTES} bytes`);
  return folder;
}

/** Why `name` cannot be a file name (one path segment), or null. */
export function fileNameProblem(name: string): string | null {
  if (name === '') return 'must not be empty';
  if (CONTROL.test(name)) return 'must not contain NUL or control characters';
  if (name.includes('/') || name.includes('\\')) return 'must be a single name, without / or \\';
  if (name === '.' || name === '..') return "must not be '.' or '..'";
  if (Buffer.byteLength(name) > NAME_MAX_BYTES) return `must be at most ${NAME_MAX_BYTES} bytes`;
  return null;
}

/** `text` matching itself only, inside a regular expression. */
export function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Filter of an account's live (not deleted) files: the prefix every index of the collection starts with. */
export function liveFiles(accountId: AccountId): Record<string, unknown> {
  return { account_id: new Types.ObjectId(String(accountId)), deleted_at: null };
}

/** `GET /files`: directly in `folder`, or anywhere below it (an anchored prefix, which an index serves). */
export function folderFilter(accountId: AccountId, folder: string, recursive: boolean): Record<string, unknown> {
  if (!recursive) return { ...liveFiles(accountId), path: folder };
  if (folder === '/') return liveFiles(accountId);
  return { ...liveFiles(accountId), path: { $regex: `^${escapeRegex(folder)}(/|$)` } };
}

/**
 * `GET /files/search` (decisions.md "Lists"). Each filter is one simple condition on an indexed
 * field of the live files: `q` a literal substring of `name_lower` (no `i` flag needed), `type`
 * exact or an anchored prefix for `type/*`, sizes an inclusive range.
 */
export function searchFilter(accountId: AccountId, query: SearchFilesQuery): Record<string, unknown> {
  const { q, type, min_size, max_size } = query;
  if (min_size !== undefined && max_size !== undefined && min_size > max_size) {
    throw new BadRequestError('querystring.min_size must not be greater than querystring.max_size');
  }
  const filter = liveFiles(accountId);
  if (q !== undefined) filter.name_lower = { $regex: escapeRegex(q.toLowerCase()) };
  if (type !== undefined) {
    const lower = type.toLowerCase();
    filter.mime_type = lower.endsWith('/*') ? { $regex: `^${escapeRegex(lower.slice(0, -1))}` } : lower;
  }
  if (min_size !== undefined || max_size !== undefined) {
    filter.size = { ...(min_size !== undefined ? { $gte: min_size } : {}), ...(max_size !== undefined ? { $lte: max_size } : {}) };
  }
  return filter;
}

export function fileNotFound(id: string): NotFoundError {
  return new NotFoundError(`File ${id} not found`);
}

/** The caller's live file, or 404 for unknown, malformed, deleted and other accounts' ids alike. */
export async function findLiveFile(db: Models, accountId: AccountId, id: string): Promise<StoredFile> {
  const _id = toObjectId(id);
  const doc = _id && await db.files.findOne({ _id, ...liveFiles(accountId) }).lean<StoredFile>();
  if (!doc) throw fileNotFound(id);
  return doc;
}

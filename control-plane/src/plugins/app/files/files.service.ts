import { Types } from 'mongoose';
import type { Readable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import {
  basePathProblem, normalizeBasePath, type Actor, type FileRecord, type ListFilesQuery, type Page, type SearchFilesQuery,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { FileDoc } from '../../../models/file.model.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import { BadRequestError, NotFoundError, ServiceUnavailableError } from '../../../errors.js';
import type { Outbox } from '../webhooks/index.js';
import { StoredObjectMissingError, type FileStore } from './store/index.js';
import type { Scanner } from './scanner.js';
import { scanAndStore, type BlockedUpload, type IntakeOptions, type ReceivedUpload, type ScannedContent, type UploadLimit } from './upload-intake.js';

export type { BlockedUpload, ReceivedUpload, ScannedContent, UploadLimit } from './upload-intake.js';

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
function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Filter of an account's live (not deleted) files: the prefix every index of the collection starts with. */
export function liveFiles(accountId: AccountId): Record<string, unknown> {
  return { account_id: new Types.ObjectId(String(accountId)), deleted_at: null };
}

/** `GET /files`: directly in `folder`, or anywhere below it (an anchored prefix, which an index serves). */
function folderFilter(accountId: AccountId, folder: string, recursive: boolean): Record<string, unknown> {
  if (!recursive) return { ...liveFiles(accountId), path: folder };
  if (folder === '/') return liveFiles(accountId);
  return { ...liveFiles(accountId), path: { $regex: `^${escapeRegex(folder)}(/|$)` } };
}

/**
 * `GET /files/search` (decisions.md "Lists"). Each filter is one simple condition on an indexed
 * field of the live files: `q` a literal substring of `name_lower` (no `i` flag needed), `type`
 * exact or an anchored prefix for `type/*`, sizes an inclusive range.
 */
function searchFilter(accountId: AccountId, query: SearchFilesQuery): Record<string, unknown> {
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

function fileNotFound(id: string): NotFoundError {
  return new NotFoundError(`File ${id} not found`);
}

/** What the files service needs, passed in so that it reads no globals. */
export interface FilesServiceOptions {
  db: Models;
  store: FileStore;
  scanner: Scanner;
  outbox: Outbox;
  /** config.uploadMaxBytes. */
  uploadMaxBytes: number;
  log: FastifyBaseLogger;
}

/** Who an upload or a deletion is for and by. */
export interface FileOwner {
  accountId: string;
  actor: Actor;
}

/**
 * The service's own files (`app.files`; docs/api.md "Files"): records, the upload's
 * scan-then-commit flow into the file store, and their events. Every query is scoped to the
 * account and to live files: a deleted file, an unknown id and another account's id are the same 404.
 */
export class FilesService {
  private readonly db: Models;
  private readonly store: FileStore;
  private readonly outbox: Outbox;
  private readonly log: FastifyBaseLogger;
  private readonly intake: IntakeOptions;

  constructor(options: FilesServiceOptions) {
    this.db = options.db;
    this.store = options.store;
    this.outbox = options.outbox;
    this.log = options.log;
    this.intake = { scanner: options.scanner, store: options.store, uploadMaxBytes: options.uploadMaxBytes, log: options.log };
  }

  /** `GET /files`: a page of the live files directly in `path` (default `/`), or anywhere below it. */
  list(accountId: AccountId, query: ListFilesQuery): Promise<Page<FileRecord>> {
    const { path, recursive, ...page } = query;
    const folder = normalizeFolder('querystring.path', path ?? '/');
    return paginate(this.db.files, folderFilter(accountId, folder, recursive ?? false), page, presentFile);
  }

  /** `GET /files/search`: a page of the live files matching every given filter (searchFilter). */
  search(accountId: AccountId, query: SearchFilesQuery): Promise<Page<FileRecord>> {
    const { limit, cursor, ...filters } = query;
    return paginate(this.db.files, searchFilter(accountId, filters), { limit, cursor }, presentFile);
  }

  /** The caller's live file, or 404 for unknown, malformed, deleted and other accounts' ids alike. */
  async get(accountId: AccountId, id: string): Promise<StoredFile> {
    const _id = toObjectId(id);
    const doc = _id && await this.db.files.findOne({ _id, ...liveFiles(accountId) }).lean<StoredFile>();
    if (!doc) throw fileNotFound(id);
    return doc;
  }

  /** Marks the live file deleted (its content stays in the store) and emits `file.deleted`; 404 as `get`. */
  async delete(owner: FileOwner, id: string): Promise<StoredFile> {
    const _id = toObjectId(id);
    const doc = _id && await this.db.files.findOneAndUpdate(
      { _id, ...liveFiles(owner.accountId) },
      { $set: { deleted_at: new Date(), deleted_by: owner.actor } },
      { new: true },
    ).lean<StoredFile>();
    if (!doc) throw fileNotFound(id);
    await this.outbox.emit(owner.accountId, 'file.deleted', { id: String(doc._id), name: doc.name, path: doc.path, size: doc.size, sha256: doc.sha256 });
    return doc;
  }

  /**
   * Opens the content of a file record (`range`: inclusive offsets already checked against its
   * size). Content missing from the store is logged on `log` (the request's) as an error and
   * rejects as ServiceUnavailableError "File content unavailable"; store errors as the store's.
   */
  async read(
    file: { _id: Types.ObjectId | string; storage_key: string }, range: { start: number; end: number } | undefined, log: FastifyBaseLogger = this.log,
  ): Promise<Readable> {
    try {
      return await this.store.read(file.storage_key, range);
    } catch (err) {
      if (!(err instanceof StoredObjectMissingError)) throw err;
      log.error({ err, file_id: String(file._id) }, 'stored file content is missing');
      throw new ServiceUnavailableError('File content unavailable', err);
    }
  }

  /**
   * Streams one uploaded file's content to the malware scanner and into the store at once
   * (upload-intake.ts `scanAndStore`): nothing of it is committed yet.
   */
  receive(source: Readable & { truncated?: boolean }, name: string, signal: AbortSignal, limit?: UploadLimit): Promise<ScannedContent> {
    return scanAndStore(this.intake, source, name, signal, limit);
  }

  /** Removes what `content` stored (best effort: a failure is logged, the sweep removes it later). */
  async discard(content: Pick<ScannedContent, 'pending'> | undefined, what = 'an upload'): Promise<void> {
    await content?.pending?.discard().catch((err: unknown) => this.log.warn({ err }, `could not discard ${what}`));
  }

  /** An upload the scan blocked: what it stored is discarded, and what its 422, event and audit name is returned. */
  async blocked(content: ScannedContent, name: string, folder: string | undefined): Promise<BlockedUpload> {
    await this.discard(content, 'a blocked upload');
    const signature = content.verdict.clean ? '' : content.verdict.signature;
    return { blocked: true, folder: folder ?? '/', name, size: content.size, sha256: content.sha256, signature };
  }

  /** Emits `file.scan_blocked` for an upload the scan blocked. */
  async reportBlocked(accountId: AccountId, upload: BlockedUpload): Promise<void> {
    const { name, folder: path, size, sha256, signature } = upload;
    await this.outbox.emit(accountId, 'file.scan_blocked', { name, path, size, sha256, signature });
  }

  /**
   * Commits a clean upload's content and writes its record, then emits `file.uploaded`. A failed
   * commit discards the content; a failed record write removes the committed content (logged on
   * `log`, the request's, when it cannot be).
   */
  async commit(owner: FileOwner, upload: ReceivedUpload, log: FastifyBaseLogger = this.log): Promise<FileRecord> {
    const { pending, name, folder, size, sha256, mimeType } = upload;
    let storageKey: string;
    try {
      storageKey = await pending.commit();
    } catch (err) {
      await pending.discard().catch(() => {});
      throw err;
    }
    let doc: StoredFile;
    try {
      doc = (await this.db.files.create({
        account_id: owner.accountId, name, name_lower: name.toLowerCase(), path: folder, size, mime_type: mimeType, sha256,
        storage_key: storageKey, uploaded_by: owner.actor,
      })).toObject() as StoredFile;
    } catch (err) {
      await this.store.remove(storageKey).catch((e: unknown) => log.warn({ err: e }, 'could not remove the content of an unrecorded upload'));
      throw err;
    }
    const file = presentFile(doc);
    await this.outbox.emit(owner.accountId, 'file.uploaded', file);
    return file;
  }
}

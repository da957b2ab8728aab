import { Types } from 'mongoose';
import {
  SHARE_DEFAULT_EXPIRES_IN_HOURS, ShareLinkMessages, type Actor, type Page, type PageQuery, type ShareLink, type ShareLinkStatus,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { ShareLinkDoc } from '../../../models/share-link.model.js';
import { GoneError, NotFoundError } from '../../../errors.js';
import { randomToken, sha256Hex } from '../../../lib/crypto.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import { liveFiles, type FilesService, type StoredFile } from './files.service.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';

const HOUR_MS = 3600 * 1000;
/** 32 random bytes, base64url without padding. */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

type LinkDoc = ShareLinkDoc & { _id: Types.ObjectId };

/** The URL of a link, relative to the server's origin (api.md "Share link"). */
export function shareUrl(token: string): string {
  return `/api/v1/files/shared/${token}`;
}

/** One status by precedence (see SHARE_LINK_STATUSES): the same rule for lists and downloads. */
export function linkStatus(link: LinkDoc, fileLive: boolean, downloads: number, now: Date): ShareLinkStatus {
  if (link.revoked_at) return 'revoked';
  if (!fileLive) return 'file_deleted';
  if (link.expires_at <= now) return 'expired';
  if (link.max_downloads != null && downloads >= link.max_downloads) return 'exhausted';
  return 'active';
}

const GONE: Record<Exclude<ShareLinkStatus, 'active'>, string> = {
  revoked: ShareLinkMessages.revoked,
  file_deleted: ShareLinkMessages.fileDeleted,
  expired: ShareLinkMessages.expired,
  exhausted: ShareLinkMessages.exhausted,
};

/** The one read shape of a link: no account, no token hash. */
export function presentShareLink(link: LinkDoc, status: ShareLinkStatus, downloads: number): ShareLink {
  return {
    id: String(link._id),
    file_id: String(link.file_id),
    status,
    expires_at: link.expires_at.toISOString(),
    max_downloads: link.max_downloads ?? null,
    downloads,
    revoked_at: link.revoked_at ? link.revoked_at.toISOString() : null,
    created_at: link.created_at.toISOString(),
    created_by: { type: link.created_by.type as Actor['type'], id: link.created_by.id ?? null },
  };
}

/** What a new link needs; absent limits take the defaults (24 hours, unlimited downloads). */
export interface CreateShareLink {
  accountId: string;
  fileId: string;
  expiresInHours?: number;
  maxDownloads?: number;
  createdBy: Actor;
}

/** Called with what the audit record names, after the checks and right before the write (plugins/app/access/audit.service.ts `change`). */
export type BeforeShare = (fileId: string, details: { share_id: string; expires_at: string; max_downloads: number | null }) => Promise<void>;

/** What the shares service needs, passed in so that it reads no globals. */
export interface SharesServiceOptions {
  db: Models;
  /** The files a link may share: only the caller's live ones. */
  files: FilesService;
}

/**
 * Share links of the service's own files (`app.shares`; docs/api.md "Share links"): a link is a
 * read credential whose token is kept only as its SHA-256, with an expiry and an optional
 * download limit that concurrent downloads cannot exceed together.
 */
export class SharesService {
  private readonly db: Models;
  private readonly files: FilesService;

  constructor(options: SharesServiceOptions) {
    this.db = options.db;
    this.files = options.files;
  }

  /** Creates a link and returns its token, the only time it exists outside the caller's hands. */
  async create(input: CreateShareLink, beforeWrite: BeforeShare = async () => {}): Promise<{ link: ShareLink; token: string }> {
    const file = await this.files.get(input.accountId, input.fileId);
    const token = randomToken(32);
    const _id = new Types.ObjectId();
    const expiresAt = new Date(Date.now() + (input.expiresInHours ?? SHARE_DEFAULT_EXPIRES_IN_HOURS) * HOUR_MS);
    await beforeWrite(String(file._id), { share_id: String(_id), expires_at: expiresAt.toISOString(), max_downloads: input.maxDownloads ?? null });
    const doc = await this.db.shareLinks.create({
      _id,
      account_id: input.accountId,
      file_id: file._id,
      token_hash: sha256Hex(token),
      expires_at: expiresAt,
      max_downloads: input.maxDownloads ?? null,
      created_by: input.createdBy,
    });
    return { link: presentShareLink(doc.toObject() as LinkDoc, 'active', 0), token };
  }

  /** A page of the account's links, newest first, with status and downloads. */
  async list(accountId: string, query: PageQuery, fileId?: Types.ObjectId): Promise<Page<ShareLink>> {
    const filter = { account_id: accountId, ...(fileId ? { file_id: fileId } : {}) };
    const page = await paginate(this.db.shareLinks, filter, query, (doc) => doc as LinkDoc);
    const fileIds = [...new Set(page.data.map((l) => String(l.file_id)))].map((id) => new Types.ObjectId(id));
    const live = await this.db.files.find({ _id: { $in: fileIds }, ...liveFiles(accountId) }, { _id: 1 }).lean();
    const liveIds = new Set(live.map((f) => String(f._id)));
    const counts = await Promise.all(page.data.map((l) => this.downloadsOf(l._id)));
    const now = new Date();
    return {
      data: page.data.map((l, i) => presentShareLink(l, linkStatus(l, liveIds.has(String(l.file_id)), counts[i]!, now), counts[i]!)),
      next_cursor: page.next_cursor,
    };
  }

  /** A page of the links of the caller's live file `fileId` (404 as FilesService.get). */
  async listOfFile(accountId: string, fileId: string, query: PageQuery): Promise<Page<ShareLink>> {
    const file = await this.files.get(accountId, fileId);
    return this.list(accountId, query, file._id);
  }

  /**
   * Revokes link `shareId` of file `fileId` (whether or not the file is still live). Unknown,
   * other accounts' and already revoked links are 404, as for API keys.
   */
  async revoke(accountId: string, fileId: string, shareId: string, by: Actor, beforeWrite: (link: LinkDoc) => Promise<void> = async () => {}): Promise<LinkDoc> {
    const id = toObjectId(shareId);
    const file = toObjectId(fileId);
    const filter = { _id: id, file_id: file, account_id: accountId, revoked_at: null };
    const link = id && file && ((await this.db.shareLinks.findOne(filter).lean()) as LinkDoc | null);
    if (!link) throw new NotFoundError(`Share link ${shareId} not found`);
    await beforeWrite(link);
    const revoked = await this.db.shareLinks.findOneAndUpdate(filter, { $set: { revoked_at: new Date(), revoked_by: by } }, { new: true }).lean();
    if (!revoked) throw new NotFoundError(`Share link ${shareId} not found`);
    return revoked as LinkDoc;
  }

  /**
   * The link of `token` and its live file, for the unauthenticated download. A malformed or
   * unknown token is 404; a revoked or expired link, or a deleted file, is 410 naming which.
   * Exhaustion is the caller's to check, by claiming (GET) or counting (HEAD).
   * The token is looked up by its SHA-256, never compared in clear: what the lookup's timing
   * could reveal is about the hash, which tells nothing about tokens near the guessed one.
   */
  async open(token: string): Promise<{ link: LinkDoc; file: StoredFile }> {
    const link = TOKEN.test(token) ? ((await this.db.shareLinks.findOne({ token_hash: sha256Hex(token) }).lean()) as LinkDoc | null) : null;
    if (!link) throw new NotFoundError(ShareLinkMessages.notFound);
    const file = await this.db.files.findOne({ _id: link.file_id, account_id: link.account_id }).lean();
    const fileLive = !!file && !file.deleted_at;
    // Exhaustion (with downloads 0) is never the answer here; it is decided by the caller.
    const status = linkStatus(link, fileLive, 0, new Date());
    if (status !== 'active') throw new GoneError(GONE[status]);
    return { link, file: file as StoredFile };
  }

  /** 410 when `link` has no download left: the early answer; claimDownload is the exact one. */
  async assertDownloadsLeft(link: LinkDoc): Promise<void> {
    if (link.max_downloads == null) return;
    if ((await this.downloadsOf(link._id)) >= link.max_downloads) throw new GoneError(ShareLinkMessages.exhausted);
  }

  /**
   * Takes the next download of `link`: download number n through the unique (share_id, n) index,
   * n <= max_downloads, so concurrent requests can never together exceed the limit. Returns n, or
   * throws 410 when every number is taken.
   *
   * Numbers are claimed upward from the current count; racing requests that lose a number move on
   * to the next. A released claim (releaseDownload) may leave a gap below the count, so when the
   * upward numbers run out while fewer than max_downloads claims exist, the gaps are claimed.
   */
  async claimDownload(link: LinkDoc): Promise<number> {
    const max = link.max_downloads ?? Number.POSITIVE_INFINITY;
    const taken = await this.downloadsOf(link._id);
    for (let n = taken + 1; n <= max; n++) {
      if (await this.tryClaim(link._id, n)) return n;
    }
    if ((await this.downloadsOf(link._id)) < max) {
      const used = new Set((await this.db.shareDownloads.find({ share_id: link._id }, { n: 1 }).lean()).map((d) => d.n));
      for (let n = 1; n <= max; n++) {
        if (!used.has(n) && (await this.tryClaim(link._id, n))) return n;
      }
    }
    throw new GoneError(ShareLinkMessages.exhausted);
  }

  /** Gives download `n` back: the request it was taken for failed before sending any content. */
  async releaseDownload(link: LinkDoc, n: number): Promise<void> {
    await this.db.shareDownloads.deleteOne({ share_id: link._id, n });
  }

  /** Downloads so far (claims taken) of `shareId`. */
  private downloadsOf(shareId: Types.ObjectId): Promise<number> {
    return this.db.shareDownloads.countDocuments({ share_id: shareId }).exec();
  }

  private async tryClaim(shareId: Types.ObjectId, n: number): Promise<boolean> {
    try {
      await this.db.shareDownloads.create({ share_id: shareId, n });
      return true;
    } catch (err) {
      if (isDuplicateKey(err)) return false;
      throw err;
    }
  }
}

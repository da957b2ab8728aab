import type { Deleted, Page } from '../schemas/common.js';
import type { FileRecord, ListFilesQuery, SearchFilesQuery } from '../schemas/files.js';
import type { CreatedShareLink, CreateShareLinkRequest, ListShareLinksQuery, ShareLink } from '../schemas/shares.js';
import { multipartUpload, type UploadSource } from './multipart.js';
import type { PageIterator } from './paging.js';
import { Resource, seg } from './resource.js';
import type { CallSettings, StreamedResponse, Transport } from './transport.js';

export type { UploadSource } from './multipart.js';

/** A byte range of a download: `{start, end?}` (inclusive) or the last `suffix` bytes. */
export type ByteRange = { start: number; end?: number } | { suffix: number };

export interface DownloadOptions extends CallSettings {
  range?: ByteRange;
  /** An ETag from an earlier download: 304 (`notModified`) when the content is the same. */
  ifNoneMatch?: string;
}

/** A download under way: the body streams; the headers say what it is. */
export interface Download extends StreamedResponse {
  /** 200 whole file, 206 a range, 304 not modified (empty body). */
  status: number;
  /** Bytes this answer carries (Content-Length), when the server sent one. */
  size: number | undefined;
  mimeType: string | undefined;
  /** The stored name, from Content-Disposition's `filename*`. */
  fileName: string | undefined;
  /** `"<sha256>"` of the whole file. */
  etag: string | undefined;
  /** `bytes a-b/size` for a 206. */
  contentRange: string | undefined;
}

function rangeHeader(range: ByteRange): string {
  return 'suffix' in range ? `bytes=-${range.suffix}` : `bytes=${range.start}-${range.end ?? ''}`;
}

/** The UTF-8 name of `filename*=UTF-8''…`, else the plain `filename`. */
function fileNameOf(disposition: string | null): string | undefined {
  if (!disposition) return undefined;
  const extended = /filename\*=UTF-8''([^;]+)/i.exec(disposition)?.[1];
  if (extended) {
    try { return decodeURIComponent(extended); } catch { /* malformed: fall back to the plain name */ }
  }
  return /filename="([^"]*)"/i.exec(disposition)?.[1];
}

/** Shared by the authenticated download and the public share-link download. */
export async function download(t: Transport, path: string, opts: DownloadOptions & { auth?: boolean } = {}): Promise<Download> {
  const headers: Record<string, string> = { accept: '*/*' };
  if (opts.range) headers.range = rangeHeader(opts.range);
  if (opts.ifNoneMatch) headers['if-none-match'] = opts.ifNoneMatch;
  const res = await t.stream('GET', path, { signal: opts.signal, timeoutMs: opts.timeoutMs, headers, auth: opts.auth });
  const length = res.headers.get('content-length');
  return {
    ...res,
    size: length === null ? undefined : Number(length),
    mimeType: res.headers.get('content-type') ?? undefined,
    fileName: fileNameOf(res.headers.get('content-disposition')),
    etag: res.headers.get('etag') ?? undefined,
    contentRange: res.headers.get('content-range') ?? undefined,
  };
}

/** `/files`: the service's own file store. */
export class FilesApi extends Resource {
  /**
   * Streams `source.content` as `multipart/form-data` (parts `path` and `file`) without holding
   * it in memory. Never retried: the content can be read only once. 422 when the malware scan
   * blocks it, 413 above the size limit, 503 when the scanner is down.
   */
  upload(source: UploadSource, s?: CallSettings): Promise<FileRecord> {
    const { body, contentType, contentLength } = multipartUpload(source);
    return this.data('POST', '/files/upload', { ...s, stream: { body, contentType, contentLength } });
  }
  /** The files directly in `path` (default `/`), or below it with `recursive`. */
  list(query?: ListFilesQuery, s?: CallSettings): Promise<Page<FileRecord>> { return this.page('/files', query, s); }
  all(query?: ListFilesQuery, s?: CallSettings): PageIterator<FileRecord> { return this.pager('/files', query, s); }
  /** Every folder: `q` name substring, `type` MIME type or `image/*`, sizes in bytes. */
  search(query?: SearchFilesQuery, s?: CallSettings): Promise<Page<FileRecord>> { return this.page('/files/search', query, s); }
  searchAll(query?: SearchFilesQuery, s?: CallSettings): PageIterator<FileRecord> { return this.pager('/files/search', query, s); }
  get(id: string, s?: CallSettings): Promise<FileRecord> { return this.data('GET', `/files/${seg(id)}`, s); }
  /** The content as a stream, whole or one range. */
  download(id: string, opts?: DownloadOptions): Promise<Download> { return download(this.t, `/files/${seg(id)}/download`, opts); }
  /** Soft delete: gone from every read, kept for audit; its share links answer 410. */
  delete(id: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/files/${seg(id)}`, s); }
}

/** Share links: created and listed per file, listed for the account, downloaded without a key. */
export class SharesApi extends Resource {
  /** `data.token` and `data.url` are shown this once. Defaults: 24 h, unlimited downloads. */
  create(fileId: string, body: CreateShareLinkRequest = {}, s?: CallSettings): Promise<CreatedShareLink> {
    return this.data('POST', `/files/${seg(fileId)}/share`, { ...s, json: body });
  }
  /** One live file's links (never their tokens). */
  listForFile(fileId: string, query?: ListShareLinksQuery, s?: CallSettings): Promise<Page<ShareLink>> {
    return this.page(`/files/${seg(fileId)}/shares`, query, s);
  }
  allForFile(fileId: string, query?: ListShareLinksQuery, s?: CallSettings): PageIterator<ShareLink> {
    return this.pager(`/files/${seg(fileId)}/shares`, query, s);
  }
  /** Every link of the account, those of deleted files included. */
  list(query?: ListShareLinksQuery, s?: CallSettings): Promise<Page<ShareLink>> { return this.page('/shares', query, s); }
  all(query?: ListShareLinksQuery, s?: CallSettings): PageIterator<ShareLink> { return this.pager('/shares', query, s); }
  revoke(fileId: string, shareId: string, s?: CallSettings): Promise<Deleted> {
    return this.remove(`/files/${seg(fileId)}/share/${seg(shareId)}`, s);
  }
  /**
   * The public download (no Authorization sent): a token, the `url` of the create answer
   * (`/api/v1/files/shared/<token>`, joined with the client's origin), or an absolute URL.
   * 410 (`gone`) once revoked, expired, used up or its file deleted.
   */
  download(tokenOrUrl: string, opts?: DownloadOptions): Promise<Download> {
    return download(this.t, this.sharedUrl(tokenOrUrl), { ...opts, auth: false });
  }

  /** The absolute URL of a share link given by token, server-relative URL or absolute URL. */
  sharedUrl(tokenOrUrl: string): string {
    if (/^https?:\/\//i.test(tokenOrUrl)) return tokenOrUrl;
    if (tokenOrUrl.startsWith('/')) return new URL(tokenOrUrl, this.t.baseUrl).toString();
    return this.t.url(`/files/shared/${seg(tokenOrUrl)}`).toString();
  }
}

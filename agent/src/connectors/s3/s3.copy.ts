import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  HeadObjectCommand,
  UploadPartCopyCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { mtimeMetadata } from '../mtime-metadata.js';
import { ConnectorError, type Entry } from '../types.js';
import type { S3Target } from './s3.config.js';
import { sameAuthority } from '../authority.js';

/** The largest object one CopyObject copies (S3's limit; R2 and GCS have the same or larger). */
export const COPY_OBJECT_MAX_BYTES = 5 * 1024 ** 3;
/** Parts copied at once: the store moves the bytes, the agent only waits, so more than an upload's. */
const PARTS_IN_FLIGHT = 8;

export interface CopyEnds {
  client: S3Client;
  /** The destination's target: its client, bucket, quirks; the copy is sent to its store. */
  to: S3Target;
  toKey: string;
  from: S3Target;
  fromKey: string;
}

/** Two targets on the same store with the same authority (S3Target.account). */
export function sameAccount(a: S3Target, b: S3Target): boolean {
  return a.type === b.type && sameAuthority(a.account, b.account);
}

/**
 * The ETag of an object, when the store's copy of it can be checked against it: a plain MD5
 * (one-part object) or a multipart ETag (`<md5 of the parts' MD5s>-<parts>`). Null for anything
 * else (no ETag, SSE-KMS's opaque ones): such an object is not copied server-side, its bytes move.
 */
export function copyableEtag(entry: Entry): { etag: string; parts: number | null } | null {
  const m = /^"?([0-9a-f]{32})(?:-(\d{1,5}))?"?$/i.exec(entry.etag ?? '');
  if (!m) return null;
  return { etag: m[1]!.toLowerCase() + (m[2] ? `-${m[2]}` : ''), parts: m[2] ? Number(m[2]) : null };
}

/**
 * Copies one object inside the store (docs/connectors.md "Server-side copies") and checks the
 * copy by its ETag, which S3 derives from the bytes: a one-part source with one CopyObject (the
 * copy's ETag is the same MD5); a multipart source part by part with UploadPartCopy over the
 * source's own part boundaries (HEAD ?partNumber=n), so the copy's multipart ETag is the source's.
 * Every request names the listed ETag (x-amz-copy-source-if-match): a source rewritten since it was
 * listed fails the copy rather than copying another version. Null, before any request, where the
 * copy cannot be verified so (see `copyableEtag`) or cannot be made (a one-part object over
 * 5 GiB; part copies on the GCS XML API, which has none).
 */
export async function copyInside(
  e: CopyEnds, entry: Entry, options: { modifiedAt?: () => Promise<Date | undefined>; signal?: AbortSignal },
): Promise<{ size: number; etag: string; modifiedAt?: Date } | null> {
  const source = copyableEtag(entry);
  if (!source) return null;
  if (source.parts === null ? entry.size > COPY_OBJECT_MAX_BYTES : e.to.type === 'gcs') return null;
  const { signal } = options;
  // Asked only now that the copy goes ahead: it may cost a stat of the source.
  const modifiedAt = await options.modifiedAt?.();
  const metadata = modifiedAt ? mtimeMetadata(modifiedAt, e.to.quirks.mtimeFormat) : {};
  const copySource = `${e.from.bucket}/${encodeURIComponent(e.fromKey).replace(/%2F/g, '/')}`;
  const ifMatch = `"${source.etag}"`;
  let etag: string | undefined;
  try {
    if (source.parts === null) {
      const res = await e.client.send(new CopyObjectCommand({
        Bucket: e.to.bucket, Key: e.toKey, CopySource: copySource, CopySourceIfMatch: ifMatch, MetadataDirective: 'REPLACE', Metadata: metadata,
      }), { abortSignal: signal });
      etag = res.CopyObjectResult?.ETag;
    } else {
      etag = await copyParts(e, copySource, ifMatch, source.parts, metadata, signal);
    }
  } catch (err) {
    const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
    if (e.name === 'PreconditionFailed' || e.$metadata?.httpStatusCode === 412) {
      throw new ConnectorError('CONFLICT', `source changed since it was listed: its ETag is no longer ${source.etag}`, { cause: err });
    }
    throw err;
  }
  const got = etag?.replace(/"/g, '').toLowerCase();
  if (got !== source.etag) {
    await e.client.send(new DeleteObjectCommand({ Bucket: e.to.bucket, Key: e.toKey })).catch(() => undefined);
    throw new ConnectorError('TRANSIENT', `the server-side copy's ETag ${got ?? '(none)'} is not the source's ${source.etag}; the copy was removed`);
  }
  return { size: entry.size, etag: etag!, ...(modifiedAt ? { modifiedAt } : {}) };
}

/** The parts' byte ranges as the source was uploaded, UploadPartCopy of each, then the commit; aborted on any failure. */
async function copyParts(e: CopyEnds, copySource: string, ifMatch: string, parts: number, metadata: Record<string, string>, signal: AbortSignal | undefined): Promise<string | undefined> {
  const lengths = await pool(parts, async (n) => {
    const head = await e.client.send(new HeadObjectCommand({ Bucket: e.from.bucket, Key: e.fromKey, PartNumber: n, IfMatch: ifMatch }), { abortSignal: signal });
    if (head.PartsCount !== undefined && head.PartsCount !== parts) throw new ConnectorError('CONFLICT', `source changed since it was listed: ${head.PartsCount} parts, not ${parts}`);
    return head.ContentLength ?? 0;
  });
  const created = await e.client.send(new CreateMultipartUploadCommand({ Bucket: e.to.bucket, Key: e.toKey, Metadata: metadata }), { abortSignal: signal });
  const uploadId = created.UploadId!;
  try {
    const starts = [0];
    for (const length of lengths) starts.push(starts.at(-1)! + length);
    const etags = await pool(parts, async (n) => {
      const first = starts[n - 1]!;
      const res = await e.client.send(new UploadPartCopyCommand({
        Bucket: e.to.bucket, Key: e.toKey, UploadId: uploadId, PartNumber: n, CopySource: copySource, CopySourceIfMatch: ifMatch,
        CopySourceRange: `bytes=${first}-${first + lengths[n - 1]! - 1}`,
      }), { abortSignal: signal });
      return res.CopyPartResult?.ETag;
    });
    const done = await e.client.send(new CompleteMultipartUploadCommand({
      Bucket: e.to.bucket, Key: e.toKey, UploadId: uploadId, MultipartUpload: { Parts: etags.map((ETag, i) => ({ ETag, PartNumber: i + 1 })) },
    }), { abortSignal: signal });
    return done.ETag;
  } catch (err) {
    // No signal: the abort must also run after a cancel, or the parts stay billed.
    await e.client.send(new AbortMultipartUploadCommand({ Bucket: e.to.bucket, Key: e.toKey, UploadId: uploadId })).catch(() => undefined);
    throw err;
  }
}

/** `fn(1..count)`, at most PARTS_IN_FLIGHT at once, results in order; the first failure rejects. */
async function pool<T>(count: number, fn: (n: number) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(count);
  let next = 1;
  const worker = async () => {
    while (next <= count) {
      const n = next++;
      out[n - 1] = await fn(n);
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARTS_IN_FLIGHT, count) }, worker));
  return out;
}

import { createHash } from 'node:crypto';
import { DeleteObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { MAX_PARTS, uploadParts, type Part } from '@xfer/storage';
import { ConnectorError, type Checksum, type WriteOptions, type WriteResult } from '../types.js';
import { mtimeMetadata } from '../mtime-metadata.js';
import type { S3Quirks, S3Tuning } from './s3.config.js';
import type { DirectS3 } from './s3.direct.js';

const MiB = 1024 * 1024;
/** S3's part sizes: each (but the last) at least 5 MiB and at most 5 GiB (at most MAX_PARTS of them). */
const MAX_GROWN_PART_BYTES = 512 * MiB;

export interface UploadTarget {
  client: S3Client;
  /** PutObject and UploadPart, without the SDK's middleware (s3.direct.ts). */
  direct: DirectS3;
  bucket: string;
  key: string;
  quirks: S3Quirks;
  tuning: S3Tuning;
}

/**
 * Uploads `body` to one object, atomically: a body that ends within the first part goes in one
 * PUT; a longer one in a multipart upload with up to `queueParts` parts in flight, committed only
 * when every part is in, and aborted (nothing left on the store) on any failure or abort. A
 * single PUT carries Content-MD5 (and x-amz-checksum-sha256 where the store takes it), each part
 * Content-MD5 or x-amz-checksum-crc32 (`quirks.partChecksum`), so the store checks every byte it
 * keeps. Memory: about (queueParts + 1) × part size, whatever the object size. The multipart
 * upload is @xfer/storage's (uploadParts), shared with the control plane's S3 file store; its
 * parts go out through DirectS3.
 *
 * Resolves with the store's checksum of a single-PUT object (SHA-256 where the store returns one,
 * else the plain MD5 ETag); a multipart object has only a checksum of checksums, so none. Either
 * way `storeVerified` says when the store's answer confirms every byte sent. The ETag goes with it
 * (the index of kept times, kept-times.ts).
 */
export async function uploadObject(t: UploadTarget, body: AsyncIterable<unknown>, options: WriteOptions): Promise<WriteResult & { etag?: string }> {
  const { signal } = options;
  // The kept modification time goes with the object itself (rclone's key and format), in the one
  // PUT or when the multipart upload is created: never a second request that could fail alone.
  const metadata = options.modifiedAt ? mtimeMetadata(options.modifiedAt, t.quirks.mtimeFormat) : undefined;
  const uploaded = await uploadParts(
    {
      client: t.client,
      bucket: t.bucket,
      key: t.key,
      checksum: t.quirks.partChecksum,
      metadata,
      partsInFlight: t.tuning.queueParts,
      partSize: (n) => partBytes(n, options.size, t.tuning.partBytes),
      sendPart: (r, signal) => t.direct.put(r.bucket, r.key, r.part.chunks, r.headers, { signal, query: { partNumber: String(r.partNumber), uploadId: r.uploadId } }),
      invalid: (message, kind) => new ConnectorError(kind === 'conflict' ? 'CONFLICT' : 'TRANSIENT', message),
    },
    body,
    signal,
  );
  if ('single' in uploaded) return putSingle(t, uploaded.single, metadata, signal);
  const upload = uploaded.multipart;
  try {
    const completed = await upload.complete(signal);
    const verdict = upload.verdict(completed);
    const etag = completed.ETag ? { etag: completed.ETag } : {};
    if (verdict.outcome === 'none') return { size: upload.size, ...etag };
    if (verdict.outcome === 'match') return { size: upload.size, storeVerified: `${t.quirks.partChecksum}-parts`, ...etag };
    await t.client.send(new DeleteObjectCommand({ Bucket: t.bucket, Key: t.key })).catch(() => undefined);
    throw new ConnectorError('TRANSIENT', `the store's composite ${t.quirks.partChecksum} ${verdict.got} does not match the parts sent (${verdict.expected}); the object was removed`);
  } catch (err) {
    await upload.abort();
    throw err;
  }
}

async function putSingle(t: UploadTarget, data: Part, metadata: Record<string, string> | undefined, signal: AbortSignal | undefined): Promise<WriteResult & { etag?: string }> {
  const md5 = createHash('md5');
  const sha256 = t.quirks.sha256 ? createHash('sha256') : null;
  for (const chunk of data.chunks) {
    md5.update(chunk);
    sha256?.update(chunk);
  }
  const digests = { md5: md5.digest('base64'), sha256: sha256?.digest('base64') };
  const headers: Record<string, string> = { 'content-md5': digests.md5 };
  if (digests.sha256) headers['x-amz-checksum-sha256'] = digests.sha256;
  for (const [key, value] of Object.entries(metadata ?? {})) headers[`x-amz-meta-${key}`] = value;
  const res = await t.direct.put(t.bucket, t.key, data.chunks, headers, { signal });
  const checksum = storeChecksum(res.checksumSha256, res.etag);
  return { size: data.length, checksum, ...(await singleVerdict(t, res.etag, digests.md5)), ...(res.etag ? { etag: res.etag } : {}) };
}

/**
 * A single PUT's ETag is the MD5 of the object: equal to the Content-MD5 sent, the store has
 * confirmed every byte (and the engine needs no MD5 of its own); different, the object is wrong
 * and is removed. An ETag of another scheme (SSE-KMS, SSE-C) gives no verdict.
 */
async function singleVerdict(t: UploadTarget, etag: string | undefined, md5Base64: string): Promise<Pick<WriteResult, 'storeVerified'>> {
  const got = etag?.replace(/"/g, '').toLowerCase();
  if (!got || !/^[0-9a-f]{32}$/.test(got)) return {};
  const expected = Buffer.from(md5Base64, 'base64').toString('hex');
  if (got === expected) return { storeVerified: 'content-md5' };
  await t.client.send(new DeleteObjectCommand({ Bucket: t.bucket, Key: t.key })).catch(() => undefined);
  throw new ConnectorError('TRANSIENT', `the store's ETag ${got} is not the MD5 of the bytes sent (${expected}); the object was removed`);
}

/**
 * Size of part `n`: the configured size, larger when the size hint needs it to fit in 10,000
 * parts, and doubling every 1,000 parts (up to 512 MiB) so that a stream of unknown length can
 * reach about 2.5 TB with 8 MiB first parts.
 */
export function partBytes(n: number, sizeHint: number | undefined, base: number): number {
  const fit = sizeHint === undefined ? 0 : Math.ceil(sizeHint / (MAX_PARTS - 1000) / MiB) * MiB;
  const grown = Math.min(base * 2 ** Math.floor((n - 1) / 1000), Math.max(base, MAX_GROWN_PART_BYTES));
  return Math.max(base, fit, grown);
}

/**
 * The checksum of an object as the store reports it: its full-object SHA-256 (not a composite
 * `...-N` of a multipart upload), else a plain MD5 ETag (32 hex digits; multipart and SSE-KMS
 * ETags are not MD5s of the content), else none.
 */
export function storeChecksum(sha256Base64: string | undefined, etag: string | undefined): Checksum | undefined {
  if (sha256Base64 && !sha256Base64.includes('-')) {
    const value = Buffer.from(sha256Base64, 'base64');
    if (value.length === 32) return { algorithm: 'sha256', value: value.toString('hex') };
  }
  const plain = etag?.replace(/"/g, '').toLowerCase();
  return plain && /^[0-9a-f]{32}$/.test(plain) ? { algorithm: 'etag', value: plain } : undefined;
}

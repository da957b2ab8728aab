import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  DeleteObjectCommand,
  CreateMultipartUploadCommand,
  ListPartsCommand,
  type CompletedPart,
  type S3Client,
} from '@aws-sdk/client-s3';
import { PartReader, type Part } from '../part-reader.js';
import { ConnectorError, type Checksum, type WriteResult } from '../types.js';
import type { S3Quirks, S3Tuning } from './s3.config.js';
import type { DirectPut } from './s3.put.js';

const MiB = 1024 * 1024;
/** S3's limits: at most 10,000 parts, each (but the last) at least 5 MiB and at most 5 GiB. */
const MAX_PARTS = 10_000;
/** Aborts of one failed multipart upload before it is left to the bucket's lifecycle rules. */
const ABORT_ATTEMPTS = 4;
const MAX_GROWN_PART_BYTES = 512 * MiB;

export interface UploadTarget {
  client: S3Client;
  /** PutObject and UploadPart, without the SDK's middleware (s3.put.ts). */
  direct: DirectPut;
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
 * keeps. Memory: about (queueParts + 1) × part size,
 * whatever the object size.
 *
 * Resolves with the store's checksum of a single-PUT object (SHA-256 where the store returns one,
 * else the plain MD5 ETag); a multipart object has only a checksum of checksums, so none. Either
 * way `storeVerified` says when the store's answer confirms every byte sent.
 */
export async function uploadObject(t: UploadTarget, body: AsyncIterable<unknown>, options: { size?: number; signal?: AbortSignal }): Promise<WriteResult> {
  const partSize = (n: number) => partBytes(n, options.size, t.tuning.partBytes);
  const reader = new PartReader(body);
  try {
    const first = (await reader.next(partSize(1))) ?? { chunks: [], length: 0 };
    const second = first.length < partSize(1) ? null : await reader.next(partSize(2));
    if (!second) return await putSingle(t, first, options.signal);
    return await putMultipart(t, reader, [first, second], partSize, options.signal);
  } finally {
    await reader.close();
  }
}

async function putSingle(t: UploadTarget, data: Part, signal: AbortSignal | undefined): Promise<WriteResult> {
  const md5 = createHash('md5');
  const sha256 = t.quirks.sha256 ? createHash('sha256') : null;
  for (const chunk of data.chunks) {
    md5.update(chunk);
    sha256?.update(chunk);
  }
  const digests = { md5: md5.digest('base64'), sha256: sha256?.digest('base64') };
  const headers: Record<string, string> = { 'content-md5': digests.md5 };
  if (digests.sha256) headers['x-amz-checksum-sha256'] = digests.sha256;
  const res = await t.direct.put(t.bucket, t.key, data.chunks, headers, { signal });
  const checksum = storeChecksum(res.checksumSha256, res.etag);
  return { size: data.length, checksum, ...(await singleVerdict(t, res.etag, digests.md5)) };
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

async function putMultipart(
  t: UploadTarget,
  reader: PartReader,
  firstParts: Part[],
  partSize: (n: number) => number,
  signal: AbortSignal | undefined,
): Promise<WriteResult> {
  const { client, bucket, key } = t;
  // Not cut short by the caller's signal: an abort while the store creates the upload would leave
  // it open with an id we never learnt. The signal is checked once the id is known.
  const created = await client.send(
    new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ...(t.quirks.partChecksum === 'crc32' ? { ChecksumAlgorithm: 'CRC32' } : {}) }),
  );
  const uploadId = created.UploadId;
  if (!uploadId) throw new ConnectorError('TRANSIENT', 'the store started a multipart upload without an upload id');
  const algorithm = t.quirks.partChecksum;
  const parts: CompletedPart[] = [];
  /** Binary checksum of each part, by part number: the object's composite checksum is made of them. */
  const partSums: Buffer[] = [];
  const inflight = new Set<Promise<void>>();
  let failure: { err: unknown } | undefined;
  let size = 0;
  let count = 0;
  const upload = (data: Part) => {
    const partNumber = ++count;
    if (partNumber > MAX_PARTS) throw new ConnectorError('CONFLICT', `the object needs more than ${MAX_PARTS} parts`);
    size += data.length;
    const sum = partChecksum(data.chunks, algorithm);
    partSums[partNumber - 1] = sum.raw;
    const done: Promise<void> = t.direct
      .put(bucket, key, data.chunks, sum.header, { signal, query: { partNumber: String(partNumber), uploadId } })
      .then(
        (res) => void parts.push({ PartNumber: partNumber, ETag: res.etag, ChecksumCRC32: sum.crc32 }),
        (err: unknown) => void (failure ??= { err }),
      )
      .finally(() => inflight.delete(done));
    inflight.add(done);
  };
  const check = () => {
    if (failure) throw failure.err;
  };
  try {
    signal?.throwIfAborted();
    for (const data of firstParts) upload(data);
    for (;;) {
      // The next part is read while the others upload (reading only once a slot was free left the
      // source idle for every part: a third of the time on sftp → s3).
      check();
      const data = await reader.next(partSize(count + 1));
      if (!data) break;
      while (inflight.size >= t.tuning.queueParts) await Promise.race(inflight);
      check();
      upload(data);
    }
    await Promise.all(inflight);
    check();
    parts.sort((a, b) => a.PartNumber! - b.PartNumber!);
    const completed = await client.send(
      new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts } }),
      { abortSignal: signal },
    );
    return { size, ...(await multipartVerdict(t, completed, partSums)) };
  } catch (err) {
    await Promise.allSettled(inflight);
    await abortUpload(client, bucket, key, uploadId);
    throw err;
  }
}

/**
 * Aborts a multipart upload until the store no longer knows it. A part cut off by the client may
 * still be landing on the server and bring the upload back after one abort (AWS: "it might be
 * necessary to abort a given multipart upload multiple times"; versitygw does it under load), so
 * ListParts checks. Without the caller's signal: it may be the reason we are here, and the upload
 * must go. Best effort: errors end it (the write already fails with its own).
 */
async function abortUpload(client: S3Client, bucket: string, key: string, uploadId: string): Promise<void> {
  const upload = { Bucket: bucket, Key: key, UploadId: uploadId };
  for (let attempt = 1; attempt <= ABORT_ATTEMPTS; attempt++) {
    await client.send(new AbortMultipartUploadCommand(upload)).catch(() => undefined);
    // NoSuchUpload (or any refusal): gone, or nothing more we can do.
    const stillThere = await client.send(new ListPartsCommand({ ...upload, MaxParts: 1 })).then(() => true, () => false);
    if (!stillThere) return;
    await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
  }
}

/**
 * Checks the object's composite checksum the store answered against the one computed from the
 * parts sent: with MD5 parts the multipart ETag (MD5 of the parts' binary MD5s, `-<count>`), with
 * CRC32 parts `ChecksumCRC32` (CRC32 of the parts' binary CRC32s, `-<count>`). Equal: the store
 * holds exactly those parts, each already checked against its checksum, so the object is verified
 * without reading it back. Different: the object is wrong; it is removed and the write fails
 * (transient: the engine retries). A store that answers neither (SSE-KMS ETags, a gateway that
 * ignores x-amz-checksum-*) gives no verdict, and the engine reads the object back.
 */
async function multipartVerdict(t: UploadTarget, completed: { ETag?: string; ChecksumCRC32?: string }, partSums: Buffer[]): Promise<Pick<WriteResult, 'storeVerified'>> {
  const count = partSums.length;
  let got: string | undefined;
  let expected: string;
  if (t.quirks.partChecksum === 'crc32') {
    got = completed.ChecksumCRC32;
    if (!got || !/^[A-Za-z0-9+/]{6}==-\d+$/.test(got)) return {};
    expected = `${crc32Base64(Buffer.concat(partSums))}-${count}`;
  } else {
    got = completed.ETag?.replace(/"/g, '').toLowerCase();
    if (!got || !/^[0-9a-f]{32}-\d+$/.test(got)) return {};
    expected = `${createHash('md5').update(Buffer.concat(partSums)).digest('hex')}-${count}`;
  }
  if (got === expected) return { storeVerified: `${t.quirks.partChecksum}-parts` };
  await t.client.send(new DeleteObjectCommand({ Bucket: t.bucket, Key: t.key })).catch(() => undefined);
  throw new ConnectorError('TRANSIENT', `the store's composite ${t.quirks.partChecksum} ${got} does not match the parts sent (${expected}); the object was removed`);
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
 * What one part carries for the store to check: Content-MD5, or x-amz-checksum-crc32 where the
 * store takes it (CRC32 costs a tenth of MD5's CPU: 1 GiB of parts is 0.2 s instead of 1.5 s).
 */
function partChecksum(chunks: readonly Buffer[], algorithm: S3Quirks['partChecksum']): { header: Record<string, string>; raw: Buffer; crc32?: string } {
  if (algorithm === 'crc32') {
    const raw = Buffer.alloc(4);
    raw.writeUInt32BE(chunks.reduce((sum, chunk) => crc32(chunk, sum), 0));
    const crc = raw.toString('base64');
    return { header: { 'x-amz-checksum-crc32': crc }, raw, crc32: crc };
  }
  const md5 = createHash('md5');
  for (const chunk of chunks) md5.update(chunk);
  const raw = md5.digest();
  return { header: { 'content-md5': raw.toString('base64') }, raw };
}

function crc32Base64(data: Buffer): string {
  const raw = Buffer.alloc(4);
  raw.writeUInt32BE(crc32(data));
  return raw.toString('base64');
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

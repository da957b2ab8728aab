import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  ListPartsCommand,
  UploadPartCommand,
  type CompletedPart,
  type CompleteMultipartUploadCommandOutput,
  type S3Client,
} from '@aws-sdk/client-s3';
import { InflightWindow } from './inflight-window.js';
import { PartReader, type Part } from './part-reader.js';

/** S3's limit: at most 10,000 parts per object. */
export const MAX_PARTS = 10_000;
/** Aborts of one failed multipart upload before it is left to the bucket's lifecycle rules (or the sweep). */
const ABORT_ATTEMPTS = 4;

/**
 * What each part carries for the store to check every byte it keeps: Content-MD5, or
 * x-amz-checksum-crc32 where the store takes it (CRC32 costs a tenth of MD5's CPU: 1 GiB of
 * parts is 0.2 s instead of 1.5 s).
 */
export type PartChecksum = 'md5' | 'crc32';

/** One UploadPart to send: the part's chunks as they are, and its checksum header. */
export interface PartRequest {
  bucket: string;
  key: string;
  uploadId: string;
  partNumber: number;
  part: Part;
  /** `content-md5` or `x-amz-checksum-crc32`, base64. */
  headers: Record<string, string>;
}

/** Sends one part; resolves with its ETag. */
export type PartSender = (request: PartRequest, signal: AbortSignal | undefined) => Promise<{ etag?: string }>;

/** Where and how to upload. */
export interface MultipartTarget {
  client: S3Client;
  bucket: string;
  key: string;
  checksum: PartChecksum;
  /** User metadata of the object (x-amz-meta-*), set when the upload is created. */
  metadata?: Record<string, string>;
  /** Parts uploading at once: memory is about (partsInFlight + 1) × part size, whatever the object size. */
  partsInFlight: number;
  /** Size of part `n` (1-based); the last part may be shorter. */
  partSize: (n: number) => number;
  /** How a part goes out; default the SDK's UploadPart (the agent sends its own, without the SDK's middleware). */
  sendPart?: PartSender;
  /** What an S3 call's failure becomes (default: thrown as it is); the body's own errors are never passed here. */
  storeError?: (err: unknown) => unknown;
  /** The error for a broken promise of the store or of S3's limits (`conflict`: too many parts). */
  invalid: (message: string, kind: 'conflict' | 'store') => unknown;
}

/** What `uploadParts` made of a body: one part held in memory, or a multipart upload with every part in. */
export type UploadedBody = { single: Part } | { multipart: MultipartUpload };

/**
 * Streams `body` to an S3 multipart upload, the one uploader of the agent's s3 connector and the
 * control plane's S3 file store. A body that ends within its first part is returned in memory
 * (`single`: the caller PUTs it, one request instead of three). A longer one goes to a multipart
 * upload, with up to `partsInFlight` parts in flight while the next one is read; each part
 * carries its checksum, so the store checks every byte. Resolves once every part is in, the
 * upload not completed: the caller completes it (at once, or at a later commit) or aborts it.
 *
 * On any failure or abort the parts in flight settle and the upload is aborted until the store
 * no longer knows it, then the error is thrown. The body is read as chunks and never copied into
 * parts (PartReader); memory is bounded by parts in flight × part size.
 */
export async function uploadParts(t: MultipartTarget, body: AsyncIterable<unknown>, signal: AbortSignal | undefined): Promise<UploadedBody> {
  const reader = new PartReader(body);
  try {
    let first: Part | null = (await reader.next(t.partSize(1))) ?? { chunks: [], length: 0 };
    let second = first.length < t.partSize(1) ? null : await reader.next(t.partSize(2));
    if (!second) return { single: first };
    const upload = await MultipartUpload.create(t);
    // Handed over in an array that send() empties, so that nothing here keeps two parts alive
    // for the whole upload once they are sent (16 MiB of a big file's peak memory).
    const firstParts = [first, second];
    first = second = null;
    await upload.send(reader, firstParts, signal);
    return { multipart: upload };
  } finally {
    await reader.close();
  }
}

/** A multipart upload this process created: its parts as they go in, its completion, its abort. */
export class MultipartUpload {
  /** The parts uploaded, in part-number order once `send` resolved. */
  readonly parts: CompletedPart[] = [];
  /** Binary checksum of each part, by part number: the object's composite checksum is made of them. */
  private readonly partSums: Buffer[] = [];
  /** Bytes in the parts. */
  size = 0;

  private constructor(private readonly t: MultipartTarget, readonly uploadId: string) {}

  /**
   * Creates the upload. Not cut short by the caller's signal: an abort while the store creates
   * the upload would leave it open under an id never learnt. The signal is checked once it is known.
   */
  static async create(t: MultipartTarget): Promise<MultipartUpload> {
    const created = await t.client
      .send(new CreateMultipartUploadCommand({ Bucket: t.bucket, Key: t.key, ...(t.metadata ? { Metadata: t.metadata } : {}), ...(t.checksum === 'crc32' ? { ChecksumAlgorithm: 'CRC32' } : {}) }))
      .catch((err: unknown) => { throw storeError(t, err); });
    if (!created.UploadId) throw t.invalid('the store started a multipart upload without an upload id', 'store');
    return new MultipartUpload(t, created.UploadId);
  }

  /**
   * Uploads `firstParts` (emptying the array), then the rest of `reader`, up to `partsInFlight`
   * at once; aborts the upload on any failure (see `uploadParts`).
   */
  async send(reader: PartReader, firstParts: Part[], signal: AbortSignal | undefined): Promise<void> {
    const window = new InflightWindow(this.t.partsInFlight);
    try {
      signal?.throwIfAborted();
      for (let part = firstParts.shift(); part; part = firstParts.shift()) {
        await window.slot();
        this.start(window, part, signal);
      }
      for (;;) {
        // The next part is read while the others upload (reading only once a slot was free left
        // the source idle for every part: a third of the time on sftp → s3).
        window.check();
        const part = await reader.next(this.t.partSize(this.partSums.length + 1));
        if (!part) break;
        await window.slot();
        this.start(window, part, signal);
      }
      await window.drain();
      this.parts.sort((a, b) => a.PartNumber! - b.PartNumber!);
    } catch (err) {
      await window.settle();
      await this.abort();
      throw err;
    }
  }

  /** Completes the upload with the parts sent: the object appears under its key. */
  async complete(signal?: AbortSignal): Promise<CompleteMultipartUploadCommandOutput> {
    const { client, bucket, key } = this.t;
    return client
      .send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: this.uploadId, MultipartUpload: { Parts: this.parts } }), { abortSignal: signal })
      .catch((err: unknown) => { throw storeError(this.t, err); });
  }

  /**
   * Checks the object's composite checksum the store answered against the one computed from the
   * parts sent: with MD5 parts the multipart ETag (MD5 of the parts' binary MD5s, `-<count>`),
   * with CRC32 parts `ChecksumCRC32` (CRC32 of the parts' binary CRC32s, `-<count>`). `match`:
   * the store holds exactly those parts, each already checked against its checksum, so the
   * object is verified without reading it back. `mismatch`: the object is wrong. `none`: the
   * store answered neither (SSE-KMS ETags, a gateway that ignores x-amz-checksum-*).
   */
  verdict(completed: { ETag?: string; ChecksumCRC32?: string }): { outcome: 'match' | 'mismatch' | 'none'; got?: string; expected?: string } {
    const count = this.partSums.length;
    let got: string | undefined;
    let expected: string;
    if (this.t.checksum === 'crc32') {
      got = completed.ChecksumCRC32;
      if (!got || !/^[A-Za-z0-9+/]{6}==-\d+$/.test(got)) return { outcome: 'none' };
      expected = `${crc32Base64(Buffer.concat(this.partSums))}-${count}`;
    } else {
      got = completed.ETag?.replace(/"/g, '').toLowerCase();
      if (!got || !/^[0-9a-f]{32}-\d+$/.test(got)) return { outcome: 'none' };
      expected = `${createHash('md5').update(Buffer.concat(this.partSums)).digest('hex')}-${count}`;
    }
    return { outcome: got === expected ? 'match' : 'mismatch', got, expected };
  }

  /** Aborts the upload until the store no longer knows it (see `abortMultipartUpload`). */
  abort(): Promise<boolean> {
    return abortMultipartUpload(this.t.client, this.t.bucket, this.t.key, this.uploadId);
  }

  private start(window: InflightWindow, part: Part, signal: AbortSignal | undefined): void {
    const partNumber = this.partSums.length + 1;
    if (partNumber > MAX_PARTS) throw this.t.invalid(`the object needs more than ${MAX_PARTS} parts`, 'conflict');
    this.size += part.length;
    const sum = partChecksum(part.chunks, this.t.checksum);
    this.partSums[partNumber - 1] = sum.raw;
    const { bucket, key } = this.t;
    const send = this.t.sendPart ?? sdkSendPart(this.t.client);
    const request = send({ bucket, key, uploadId: this.uploadId, partNumber, part, headers: sum.header }, signal).catch((err: unknown) => {
      throw storeError(this.t, err);
    });
    window.add(request, (res) => void this.parts.push({ PartNumber: partNumber, ETag: res.etag, ChecksumCRC32: sum.crc32 }));
  }
}

/**
 * Aborts a multipart upload until the store no longer knows it. A part cut off by the client may
 * still be landing on the server and bring the upload back after one abort (AWS: "it might be
 * necessary to abort a given multipart upload multiple times"; versitygw does it under load), so
 * ListParts checks. Without the caller's signal: it may be the reason we are here, and the upload
 * must go. Best effort: errors end it (the write already fails with its own). Resolves with
 * whether the first abort was accepted (false: already gone, or the store refused).
 */
export async function abortMultipartUpload(client: S3Client, bucket: string, key: string, uploadId: string): Promise<boolean> {
  const upload = { Bucket: bucket, Key: key, UploadId: uploadId };
  let aborted = false;
  for (let attempt = 1; attempt <= ABORT_ATTEMPTS; attempt++) {
    const accepted = await client.send(new AbortMultipartUploadCommand(upload)).then(() => true, () => false);
    if (attempt === 1) aborted = accepted;
    // NoSuchUpload (or any refusal): gone, or nothing more we can do.
    const stillThere = await client.send(new ListPartsCommand({ ...upload, MaxParts: 1 })).then(() => true, () => false);
    if (!stillThere) return aborted;
    await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
  }
  return aborted;
}

/**
 * UploadPart through the SDK, the part joined into one buffer (the SDK takes no chunk list). Not
 * an async function on purpose: a suspended async function keeps its arguments alive until it
 * resolves, and the request holds the part's chunks, so every part in flight would cost its size
 * twice (the chunks and the joined copy). Returning the SDK's promise lets the chunks go as soon
 * as they are joined.
 */
function sdkSendPart(client: S3Client): PartSender {
  return (r, signal) => {
    const { chunks, length } = r.part;
    const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length);
    const md5 = r.headers['content-md5'];
    const crc = r.headers['x-amz-checksum-crc32'];
    const command = new UploadPartCommand({
      Bucket: r.bucket, Key: r.key, UploadId: r.uploadId, PartNumber: r.partNumber, Body: body, ContentLength: length,
      ...(md5 ? { ContentMD5: md5 } : {}),
      ...(crc ? { ChecksumCRC32: crc } : {}),
    });
    return client.send(command, { abortSignal: signal }).then((res) => ({ etag: res.ETag }));
  };
}

function storeError(t: MultipartTarget, err: unknown): unknown {
  return t.storeError ? t.storeError(err) : err;
}

/** A part's checksum: the header that carries it, its binary value, and the CRC32 CompleteMultipartUpload repeats. */
function partChecksum(chunks: readonly Buffer[], algorithm: PartChecksum): { header: Record<string, string>; raw: Buffer; crc32?: string } {
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

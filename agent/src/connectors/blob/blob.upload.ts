import { createHash, randomBytes } from 'node:crypto';
import type { BlockBlobClient, BlockBlobUploadOptions } from '@azure/storage-blob';
import { ConnectorError, type WriteOptions, type WriteResult } from '../types.js';
import { mtimeMetadata } from '../mtime-metadata.js';
import type { BlobTuning } from './blob.config.js';
import { InflightWindow, PartReader } from '@xfer/storage';

const MiB = 1024 * 1024;
/** Azure's limits: at most 50,000 committed blocks per blob, each at most 4,000 MiB. */
const MAX_BLOCKS = 50_000;
const MAX_GROWN_BLOCK_BYTES = 512 * MiB;

/**
 * Uploads `body` to one block blob, atomically: a body that ends within the first block goes in
 * one Put Blob; a longer one is staged in blocks (up to `queueBlocks` in flight) that become the
 * blob only when Put Block List commits them. Nothing is committed on a failure or abort: the
 * service never shows uncommitted blocks and discards them (at the blob's next commit, or after a
 * week). Every request carries Content-MD5, so the service checks every byte; the blob's
 * Content-MD5 property is set to the MD5 of the whole file, so `stat` and `list` report it.
 * Memory: about (queueBlocks + 1) × block size, whatever the file size.
 */
export async function uploadBlob(blob: BlockBlobClient, body: AsyncIterable<unknown>, options: WriteOptions, tuning: BlobTuning): Promise<WriteResult> {
  // The kept modification time, as rclone's azureblob backend writes it, set by the request that
  // makes the blob (Put Blob or Put Block List): never a second request that could fail alone.
  const metadata = options.modifiedAt ? mtimeMetadata(options.modifiedAt, 'rfc3339-nano9') : undefined;
  const blockSize = (n: number) => blockBytes(n, options.size, tuning.blockBytes);
  const reader = new PartReader(body);
  try {
    const first = (await reader.nextBuffer(blockSize(1))) ?? Buffer.alloc(0);
    const second = first.length < blockSize(1) ? null : await reader.nextBuffer(blockSize(2));
    if (!second) return await putSingle(blob, first, metadata, options.signal);
    return await putBlocks(blob, reader, [first, second], blockSize, metadata, options.signal, tuning.queueBlocks);
  } finally {
    await reader.close();
  }
}

async function putSingle(blob: BlockBlobClient, data: Buffer, metadata: Record<string, string> | undefined, signal: AbortSignal | undefined): Promise<WriteResult> {
  const md5 = createHash('md5').update(data).digest();
  // Put Blob checks both against the body: Content-MD5 (the SDK sends it though its type omits
  // it) and x-ms-blob-content-md5, which it also keeps as the blob's Content-MD5 property.
  const upload: UploadWithMd5 = { abortSignal: signal, transactionalContentMD5: md5, blobHTTPHeaders: { blobContentMD5: md5 }, metadata };
  await blob.upload(data, data.length, upload);
  // The service checked the one request's Content-MD5 against every byte it stored.
  return { size: data.length, checksum: { algorithm: 'md5', value: md5.toString('hex') }, storeVerified: 'content-md5' };
}

async function putBlocks(
  blob: BlockBlobClient,
  reader: PartReader,
  firstBlocks: Buffer[],
  blockSize: (n: number) => number,
  metadata: Record<string, string> | undefined,
  signal: AbortSignal | undefined,
  queueBlocks: number,
): Promise<WriteResult> {
  // Block ids must have one length per blob; a random part keeps two writers of one blob from
  // overwriting each other's uncommitted blocks.
  const nonce = randomBytes(6).toString('hex');
  const ids: string[] = [];
  const whole = createHash('md5');
  const window = new InflightWindow(queueBlocks);
  let size = 0;
  const stage = (data: Buffer) => {
    if (ids.length >= MAX_BLOCKS) throw new ConnectorError('CONFLICT', `the file needs more than ${MAX_BLOCKS} blocks`);
    const id = Buffer.from(`${nonce}-${String(ids.length).padStart(6, '0')}`).toString('base64');
    ids.push(id);
    size += data.length;
    whole.update(data);
    const md5 = createHash('md5').update(data).digest();
    window.add(blob.stageBlock(id, data, data.length, { abortSignal: signal, transactionalContentMD5: md5 }));
  };
  try {
    for (const block of firstBlocks) stage(block);
    for (;;) {
      // The next block is read while the others upload, so the source never waits for a free slot.
      window.check();
      const block = await reader.nextBuffer(blockSize(ids.length + 1));
      if (!block) break;
      await window.slot();
      stage(block);
    }
    await window.drain();
  } finally {
    // Never leave a request running past the write, whatever happened.
    await window.settle();
  }
  signal?.throwIfAborted();
  const md5 = whole.digest();
  await blob.commitBlockList(ids, { abortSignal: signal, blobHTTPHeaders: { blobContentMD5: md5 }, metadata });
  // The commit names exactly the blocks staged (it fails if one is missing); the properties
  // confirm the whole: the size the service assembled and the Content-MD5 it keeps.
  const props = await blob.getProperties({ abortSignal: signal });
  const storedMd5 = props.contentMD5 ? Buffer.from(props.contentMD5).toString('hex') : undefined;
  if (props.contentLength !== size || (storedMd5 !== undefined && storedMd5 !== md5.toString('hex'))) {
    await blob.deleteIfExists().catch(() => undefined);
    throw new ConnectorError('TRANSIENT', `the committed blob holds ${props.contentLength} bytes of ${size} sent`);
  }
  return { size, checksum: { algorithm: 'md5', value: md5.toString('hex') }, storeVerified: 'md5-blocks' };
}

/** Upload options with the Content-MD5 the SDK passes on (BlockBlobClient.upload) but does not declare. */
export type UploadWithMd5 = BlockBlobUploadOptions & { transactionalContentMD5?: Uint8Array };

/**
 * Size of block `n` (1-based): the base size, grown so that a file of `sizeHint` bytes fits in
 * 50,000 blocks, or, without a hint, doubled every 5,000 blocks (up to 512 MiB), so that a stream
 * of unknown length can reach about 9 TB.
 */
export function blockBytes(n: number, sizeHint: number | undefined, base: number): number {
  if (sizeHint !== undefined) {
    let size = base;
    while (size * (MAX_BLOCKS - 1) < sizeHint && size < MAX_GROWN_BLOCK_BYTES) size *= 2;
    return size;
  }
  return Math.min(base * 2 ** Math.floor((n - 1) / 5000), MAX_GROWN_BLOCK_BYTES);
}

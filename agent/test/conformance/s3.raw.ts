import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  AbortMultipartUploadCommand,
} from '@aws-sdk/client-s3';
import type { RawStore } from './conformance.suite.js';

/**
 * The S3 test server through a plain S3 client of its own (not the connector's code), on one
 * bucket, below `prefix` ('' or 'a/b').
 */
export class RawS3 implements RawStore {
  private readonly client: S3Client;

  constructor(
    opts: { endpoint: string; accessKeyId: string; secretAccessKey: string },
    readonly bucket: string,
    private readonly prefix: string,
  ) {
    this.client = new S3Client({
      endpoint: opts.endpoint, region: 'us-east-1', forcePathStyle: true,
      credentials: { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey },
      requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async createBucket(): Promise<void> {
    await this.client.send(new CreateBucketCommand({ Bucket: this.bucket }));
  }

  async list(rel: string): Promise<string[]> {
    const start = this.key(rel) === '' ? '' : `${this.key(rel)}/`;
    const root = this.prefix === '' ? '' : `${this.prefix}/`;
    const out: string[] = [];
    for await (const key of this.keys(start)) out.push(key.slice(root.length).replace(/\/$/, ''));
    return out.sort();
  }

  async put(rel: string, data: Buffer, metadata?: Record<string, string>): Promise<void> {
    await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: this.key(rel), Body: data, ContentLength: data.length, Metadata: metadata }));
  }

  async remove(rel: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.key(rel) }));
  }

  async sha256(rel: string): Promise<string | null> {
    let body: Readable;
    try {
      body = (await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.key(rel) }))).Body as Readable;
    } catch (err) {
      if ((err as { name?: string }).name === 'NoSuchKey') return null;
      throw err;
    }
    const hash = createHash('sha256');
    for await (const chunk of body) hash.update(chunk as Buffer);
    return hash.digest('hex');
  }

  async openUploads(): Promise<number> {
    const res = await this.client.send(new ListMultipartUploadsCommand({ Bucket: this.bucket }));
    return res.Uploads?.length ?? 0;
  }

  /** Empties and deletes the bucket (open multipart uploads included). */
  async destroy(): Promise<void> {
    // Emptying and deleting are retried a few rounds: a write the test started can still land (a
    // transfer's last part, a multipart upload completed after the listing), and a listing
    // continued while its keys are deleted can skip some. Each round lists from the start.
    for (let round = 1; ; round++) {
      const uploads = await this.client.send(new ListMultipartUploadsCommand({ Bucket: this.bucket }));
      for (const u of uploads.Uploads ?? []) await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: u.Key, UploadId: u.UploadId }));
      for (;;) {
        const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, MaxKeys: 1000 }));
        const keys = (page.Contents ?? []).flatMap((o) => (o.Key ? [o.Key] : []));
        if (keys.length === 0) break;
        const deleted = await this.client.send(new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: keys.map((Key) => ({ Key })) } }));
        // Else the same keys would be listed again, for ever.
        if (deleted.Errors?.length) throw new Error(`could not delete ${deleted.Errors[0]!.Key}: ${deleted.Errors[0]!.Message}`);
      }
      try {
        await this.client.send(new DeleteBucketCommand({ Bucket: this.bucket }));
        break;
      } catch (err) {
        if ((err as { name?: string }).name !== 'BucketNotEmpty' || round === 5) throw err;
      }
    }
    this.client.destroy();
  }

  private async *keys(prefix: string): AsyncGenerator<string> {
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: prefix, ContinuationToken: token }));
      for (const o of page.Contents ?? []) if (o.Key) yield o.Key;
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  private key(rel: string): string {
    return this.prefix === '' ? rel : rel === '' ? this.prefix : `${this.prefix}/${rel}`;
  }
}

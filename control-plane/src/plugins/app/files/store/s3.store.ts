import type { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListMultipartUploadsCommand,
  PutObjectCommand,
  S3Client,
  type ListMultipartUploadsCommandOutput,
} from '@aws-sdk/client-s3';
import { abortMultipartUpload, uploadParts, type MultipartUpload, type Part } from '@xfer/storage';
import type { FileStoreConfig } from '../../../../config.js';
import { guardWrite, newObjectId, PendingContent, storageUnavailable } from './common.js';
import { StoredObjectMissingError, type FileStore, type PendingObject } from './types.js';

export type S3FileStoreConfig = Extract<FileStoreConfig, { kind: 's3' }>;

/** Tuning; the defaults are what the service runs with (tests may shrink nothing: S3 parts are ≥ 5 MiB). */
export interface S3FileStoreOptions {
  /** Size of every part but the last. A body of at most this is kept in memory until commit. */
  partBytes: number;
  /** Parts uploaded at once per write: memory per write is about (partsInFlight + 1) × partBytes. */
  partsInFlight: number;
}

export const DEFAULT_S3_FILE_STORE_OPTIONS: S3FileStoreOptions = { partBytes: 8 * 1024 * 1024, partsInFlight: 2 };

/** How long the start-up check of the bucket may take before the store is reported unreachable. */
const CHECK_TIMEOUT_MS = 5_000;

/**
 * Files in an S3-compatible bucket, as `<prefix>objects/<id>`. A write is a multipart upload that
 * only `commit` completes, so nothing is visible under any key before the scan passed and nothing
 * is copied; a body that ends within its first part is kept in memory (at most one part) and PUT
 * at commit instead. The upload is @xfer/storage's (uploadParts), the agent's s3 connector's
 * too: every part carries its Content-MD5, and a failed or discarded upload is aborted until the
 * store no longer knows it. `discard` aborts the multipart upload; one that a crash left behind
 * is aborted by `sweep` (ListMultipartUploads under the prefix, by initiation time).
 */
export class S3FileStore implements FileStore {
  readonly kind = 's3' as const;
  readonly client: S3Client;
  readonly bucket: string;
  /** Prefix of every key this store makes. */
  readonly objectsPrefix: string;
  readonly options: S3FileStoreOptions;
  private readonly keyPattern: RegExp;

  constructor(readonly config: S3FileStoreConfig, options: Partial<S3FileStoreOptions> = {}) {
    this.options = { ...DEFAULT_S3_FILE_STORE_OPTIONS, ...options };
    this.bucket = config.bucket;
    this.objectsPrefix = `${config.prefix}objects/`;
    this.keyPattern = new RegExp(`^${this.objectsPrefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[0-9a-f]{32}$`);
    this.client = new S3Client({
      region: config.region,
      endpoint: config.endpoint ?? undefined,
      forcePathStyle: config.forcePathStyle,
      credentials: { accessKeyId: config.accessKeyId, secretAccessKey: config.secretAccessKey },
      // The SDK's default CRC32 trailers (aws-chunked bodies) are refused by several S3-compatible
      // stores; the signed payload hash already has the store check every byte of a part.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      // From the configuration only, never from AWS_ENDPOINT_URL* in the service's environment.
      ignoreConfiguredEndpointUrls: true,
      // With "Expect: 100-continue" (the default above 2 MB) the SDK sends each part on a fresh
      // socket outside the keep-alive pool: a TCP (and TLS) handshake per 8 MiB.
      expectContinueHeader: false,
      maxAttempts: 3,
      requestHandler: {
        connectionTimeout: 10_000,
        // Idle socket, not whole request: a download may stream for hours.
        socketTimeout: 120_000,
        httpAgent: { keepAlive: true, maxSockets: 64 },
        httpsAgent: { keepAlive: true, maxSockets: 64 },
      },
    });
  }

  /** Where the bucket is, for log lines (never for API answers). */
  get where(): string {
    return `bucket ${this.bucket} at ${this.config.endpoint ?? `AWS S3 (${this.config.region})`}`;
  }

  /** HEAD of the bucket: null when usable, else why not (the plugin logs it; the service still starts). */
  async check(): Promise<string | null> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }), { abortSignal: AbortSignal.timeout(CHECK_TIMEOUT_MS) });
      return null;
    } catch (err) {
      return s3Reason(err);
    }
  }

  async write(body: Readable, signal?: AbortSignal): Promise<PendingObject> {
    const key = `${this.objectsPrefix}${newObjectId()}`;
    const { partBytes, partsInFlight } = this.options;
    // A failed upload is aborted by uploadParts itself: nothing else to clean up.
    return guardWrite(body, signal, async () => {
      const uploaded = await uploadParts(
        {
          client: this.client,
          bucket: this.bucket,
          key,
          checksum: 'md5',
          partsInFlight,
          partSize: () => partBytes,
          storeError: s3Unavailable,
          invalid: (message) => storageUnavailable(message, undefined),
        },
        body,
        signal,
      );
      if ('single' in uploaded) return new S3Pending(this, key, uploaded.single.length, { body: uploaded.single });
      return new S3Pending(this, key, uploaded.multipart.size, { upload: uploaded.multipart });
    });
  }

  async read(key: string, range?: { start: number; end: number }): Promise<Readable> {
    if (!this.isKey(key)) throw new StoredObjectMissingError(key);
    try {
      const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: range ? `bytes=${range.start}-${range.end}` : undefined }));
      return res.Body as Readable;
    } catch (err) {
      if (isMissing(err)) throw new StoredObjectMissingError(key);
      throw s3Unavailable(err);
    }
  }

  async remove(key: string): Promise<void> {
    if (!this.isKey(key)) return;
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key })).catch((err: unknown) => {
      if (!isMissing(err)) throw s3Unavailable(err);
    });
  }

  async sweep(olderThanMs: number): Promise<number> {
    const cutoff = Date.now() - olderThanMs;
    let removed = 0;
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    do {
      const page: ListMultipartUploadsCommandOutput = await this.client
        .send(new ListMultipartUploadsCommand({ Bucket: this.bucket, Prefix: this.objectsPrefix, KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker }))
        .catch((err: unknown) => { throw s3Unavailable(err); });
      for (const upload of page.Uploads ?? []) {
        if (!upload.Key || !upload.UploadId || !upload.Initiated || upload.Initiated.getTime() >= cutoff) continue;
        if (await this.abortUpload(upload.Key, upload.UploadId)) removed++;
      }
      keyMarker = page.IsTruncated ? page.NextKeyMarker : undefined;
      uploadIdMarker = page.IsTruncated ? page.NextUploadIdMarker : undefined;
    } while (keyMarker);
    return removed;
  }

  async close(): Promise<void> {
    this.client.destroy();
  }

  /** Aborts a multipart upload until the store no longer knows it; true when it did (false: already gone, or the store failed). */
  async abortUpload(key: string, uploadId: string): Promise<boolean> {
    return abortMultipartUpload(this.client, this.bucket, key, uploadId);
  }

  private isKey(key: string): boolean {
    return typeof key === 'string' && this.keyPattern.test(key);
  }
}

/** Content waiting for its commit: a completed-at-commit multipart upload, or a short body in memory. */
class S3Pending extends PendingContent {
  constructor(
    private readonly store: S3FileStore,
    private readonly key: string,
    size: number,
    private content: { body: Part } | { upload: MultipartUpload } | null,
  ) {
    super(size);
  }

  protected async persist(): Promise<string> {
    const { client, bucket } = this.store;
    const content = this.content!;
    try {
      if ('body' in content) {
        const { chunks, length } = content.body;
        await client.send(new PutObjectCommand({ Bucket: bucket, Key: this.key, Body: Buffer.concat(chunks, length), ContentLength: length }));
      } else {
        await content.upload.complete();
      }
    } catch (err) {
      // complete() has made its failures ServiceUnavailableError already.
      throw 'upload' in content ? err : s3Unavailable(err);
    }
    this.content = null;
    return this.key;
  }

  protected async removeTemporary(commitAttempted: boolean): Promise<void> {
    const content = this.content;
    this.content = null;
    if (content && 'upload' in content) await content.upload.abort();
    // A failed commit may have completed on the store all the same (an answer lost on the way).
    if (commitAttempted) await this.store.remove(this.key);
  }
}

function isMissing(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}

function s3Unavailable(err: unknown) {
  return storageUnavailable(s3Reason(err), err);
}

const NETWORK: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'cannot resolve the endpoint host',
  EAI_AGAIN: 'cannot resolve the endpoint host',
  ETIMEDOUT: 'timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EPIPE: 'connection closed',
};

/**
 * Why an S3 call failed, for the 503 answer and the logs: no endpoint, bucket or key in it. The
 * SDK's retry layer re-wraps some network errors keeping only the message, so the code is looked
 * for there too.
 */
function s3Reason(err: unknown): string {
  const e = (err ?? {}) as { name?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  const network = (e.code && NETWORK[e.code] ? e.code : undefined) ?? Object.keys(NETWORK).find((code) => e.message?.includes(code));
  if (network) return `the S3 store cannot be reached: ${NETWORK[network]} (${network})`;
  const name = e.name ?? 'Error';
  if (name === 'TimeoutError' || name === 'AbortError') return 'the S3 store did not answer in time';
  if (name === 'NoSuchBucket') return 'the bucket does not exist (NoSuchBucket)';
  if (['InvalidAccessKeyId', 'SignatureDoesNotMatch', 'XAdminUserNotFound'].includes(name)) return `the S3 store does not accept the access key (${name})`;
  if (name === 'AccessDenied' || e.$metadata?.httpStatusCode === 403) return `access denied by the S3 store (${name})`;
  const status = e.$metadata?.httpStatusCode;
  return `the S3 store answered ${name}${status ? ` (HTTP ${status})` : ''}`;
}

import { createHash } from 'node:crypto';
import { isIP } from 'node:net';
import type { S3ClientConfig } from '@aws-sdk/client-s3';
import type { ConnectionSettings } from '@xfer/shared';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { closedAccess } from '../access.js';
import type { NetworkGuard } from '../network-guard.js';
import type { MtimeFormat } from '../mtime-metadata.js';
import { ConnectorError } from '../types.js';

export type S3FamilyType = 's3' | 'r2' | 'gcs';

/** Tuning of the S3-family connectors (docs/connectors.md). */
export interface S3Tuning {
  /** Objects up to this size go in one PUT; larger ones, and streams of unknown length that reach it, in parts. */
  partBytes: number;
  /** Parts uploaded at once per object: memory per write is about (queueParts + 1) × partBytes. */
  queueParts: number;
  /** Objects deleted at once where the store has no multi-object delete (gcs). */
  deleteParallel: number;
  connectTimeoutMs: number;
  /** A socket with no traffic for this long fails the request (retried by the engine as TRANSIENT). */
  socketTimeoutMs: number;
}

export const DEFAULT_S3_TUNING: S3Tuning = {
  partBytes: 8 * 1024 * 1024,
  // 3 uploaded while the 4th is read: as fast as 4 against versitygw, and 8 MiB less per write.
  queueParts: 3,
  deleteParallel: 16,
  connectTimeoutMs: 10_000,
  socketTimeoutMs: 120_000,
};

/** What differs between the stores behind the one implementation. */
export interface S3Quirks {
  /**
   * Send x-amz-checksum-sha256 with a single-PUT object (besides Content-MD5): the store checks,
   * keeps and returns the SHA-256 the engine compares. Only `s3`: the GCS XML API has no
   * x-amz-checksum-* headers, and R2 is left on MD5, which every S3 implementation checks.
   */
  sha256: boolean;
  /**
   * What each part of a multipart upload carries for the store to check, and so how the object's
   * composite checksum is verified: `crc32` (x-amz-checksum-crc32, ChecksumCRC32 `...-N`) for
   * s3, whose API has it; `md5` (Content-MD5, multipart ETag `...-N`) for r2 and gcs, whose
   * S3 layers are only known to check MD5.
   */
  partChecksum: 'crc32' | 'md5';
  /** Multi-object delete (POST ?delete); the GCS XML API has none. */
  batchDelete: boolean;
  /**
   * How a kept modification time is written in the object's `mtime` metadata: as rclone's backend
   * for this store writes it (mtime-metadata.ts), seconds for s3 and r2 (rclone's s3 backend),
   * RFC 3339 for gcs (rclone's googlecloudstorage backend, the one rclone users pick for GCS).
   */
  mtimeFormat: MtimeFormat;
}

/** Where a connection's objects are, and how to reach them. */
export interface S3Target {
  type: S3FamilyType;
  bucket: string;
  /** Key prefix of the base path, without slashes at either end ('' for the bucket's root). */
  prefix: string;
  /** The endpoint, for messages: a URL, or "AWS S3 (us-east-1)". */
  where: string;
  quirks: S3Quirks;
  clientConfig: S3ClientConfig;
  /** The agent's allow/deny lists: the SDK's agents and DirectS3's go through it. */
  guard: NetworkGuard;
  /**
   * SHA-256 of type, endpoint, region and credentials: two targets with equal accounts reach the
   * same store with the same authority, so one may copy the other's objects server-side (s3.copy.ts)
   * with nothing the source connection could not do itself. Compared in constant time.
   */
  account: Buffer;
}

/**
 * Reads a connection's settings into a target. The endpoint: `host`/`port`/`secure` when a host is
 * given; else AWS S3's regional endpoint (s3), `<account_id>.r2.cloudflarestorage.com` (r2), or
 * storage.googleapis.com (gcs). Buckets are addressed path-style (`host/bucket/key`) for r2 and gcs
 * (both document it), for s3 with `force_path_style`, and for s3 when the host is an IP address or
 * a single-label name such as localhost, where `bucket.host` cannot resolve. The port alone never
 * decides it: an S3-compatible store on another port may well have wildcard DNS.
 */
export function s3Target(settings: ConnectionSettings, tuning: S3Tuning, guard: NetworkGuard = closedAccess().network): S3Target {
  const type = settings.type as S3FamilyType;
  const { bucket, prefix } = bucketAndPrefix(settings.path);
  const credentials = settings.credentials;
  const accessKeyId = stringField(credentials, 'access_key_id');
  const secretAccessKey = stringField(credentials, 'secret_access_key');
  if (!accessKeyId || !secretAccessKey) throw new ConnectorError('AUTH', `credentials.access_key_id and credentials.secret_access_key are required for ${type} connections`);
  const region = stringField(credentials, 'region') ?? (type === 's3' ? 'us-east-1' : 'auto');
  const accountId = stringField(credentials, 'account_id');
  const host = settings.host ?? (type === 'r2' && accountId ? `${accountId}.r2.cloudflarestorage.com` : type === 'gcs' ? 'storage.googleapis.com' : null);
  if (type === 'r2' && !host) throw new ConnectorError('AUTH', 'r2 connections need host or credentials.account_id');
  const secure = settings.options.secure !== false;
  const defaultPort = secure ? 443 : 80;
  const endpoint = host ? `${secure ? 'https' : 'http'}://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}${settings.port && settings.port !== defaultPort ? `:${settings.port}` : ''}` : undefined;
  const bareHost = host?.replace(/^\[|\]$/g, '') ?? '';
  const forcePathStyle = type !== 's3' || settings.options.force_path_style === true || (host !== null && (isIP(bareHost) !== 0 || !bareHost.includes('.')));
  // The SDK's own agent settings (keep-alive, 50 sockets), with every connection through the guard.
  const agent = { keepAlive: true, maxSockets: 50 };
  const handler = {
    connectionTimeout: tuning.connectTimeoutMs, socketTimeout: tuning.socketTimeoutMs,
    httpAgent: guard.protect(new HttpAgent(agent)), httpsAgent: guard.protect(new HttpsAgent(agent)),
  };
  return {
    type,
    bucket,
    prefix,
    where: endpoint ?? `AWS S3 (${region})`,
    guard,
    account: createHash('sha256').update(JSON.stringify([type, endpoint ?? null, region, accessKeyId, secretAccessKey])).digest(),
    quirks: { sha256: type === 's3', partChecksum: type === 's3' ? 'crc32' : 'md5', batchDelete: type !== 'gcs', mtimeFormat: type === 'gcs' ? 'rfc3339' : 'seconds' },
    clientConfig: {
      region,
      endpoint,
      forcePathStyle,
      credentials: { accessKeyId, secretAccessKey },
      // The connector sends its own Content-MD5 (and SHA-256 for s3) on every upload; the SDK's
      // default CRC32 trailers (aws-chunked) are refused by the GCS XML API and by older
      // S3-compatible stores, so it adds checksums only where an operation requires one.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      // Reads are not checked by the SDK: the engine hashes every byte with SHA-256 anyway, the
      // SDK's CRC64NVME of a multipart object (pure JavaScript) halved the read speed, and GCS and
      // R2 do not return x-amz-checksum-* on reads.
      responseChecksumValidation: 'WHEN_REQUIRED',
      // The endpoint comes from the connection only, never from AWS_ENDPOINT_URL* on the agent's host.
      ignoreConfiguredEndpointUrls: true,
      maxAttempts: 3,
      requestHandler: handler,
    },
  };
}

/** `/<bucket>[/<prefix>]` → bucket and prefix; refused without a bucket. */
export function bucketAndPrefix(path: string): { bucket: string; prefix: string } {
  const segments = path.split('/').filter((s) => s !== '' && s !== '.');
  const bucket = segments.shift();
  if (!bucket) throw new ConnectorError('NOT_FOUND', "the connection's path must name a bucket: /<bucket>[/<prefix>]");
  return { bucket, prefix: segments.join('/') };
}

function stringField(record: Readonly<Record<string, unknown>>, key: string): string | undefined {
  const value = record[key];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

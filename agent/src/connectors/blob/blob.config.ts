import { isIP } from 'node:net';
import { BlobServiceClient, StorageSharedKeyCredential, type StoragePipelineOptions } from '@azure/storage-blob';
import type { ConnectionSettings } from '@xfer/shared';
import { ConnectorError } from '../types.js';

/** Tuning of the blob connector (docs/connectors.md). */
export interface BlobTuning {
  /** Files up to this size go in one Put Blob; larger ones, and streams of unknown length that reach it, in blocks. */
  blockBytes: number;
  /** Blocks staged at once per file: memory per write is about (queueBlocks + 1) × blockBytes. */
  queueBlocks: number;
  /** Blobs deleted at once by `remove`. */
  deleteParallel: number;
  /** Attempts per request inside the SDK (the engine retries TRANSIENT failures on top). */
  maxTries: number;
  /** A request that has not finished in this long fails (TRANSIENT). */
  tryTimeoutMs: number;
}

export const DEFAULT_BLOB_TUNING: BlobTuning = {
  blockBytes: 8 * 1024 * 1024,
  queueBlocks: 4,
  deleteParallel: 16,
  maxTries: 3,
  tryTimeoutMs: 120_000,
};

/** Where a connection's blobs are, and a client to reach them. */
export interface BlobTarget {
  container: string;
  /** Name prefix of the base path, without slashes at either end ('' for the container's root). */
  prefix: string;
  /** The account endpoint, for messages (no secrets: a SAS query string is cut off). */
  where: string;
  service: BlobServiceClient;
}

/**
 * Reads a connection's settings into a target. Credentials are either `connection_string` (as the
 * Azure portal shows it, or an emulator's `BlobEndpoint=...`; `host`/`port` are then ignored) or
 * `account_name` + `account_key`, whose endpoint is `https://<account>.blob.<endpoint_suffix>`, or
 * `https://<host>[:port]` when `host` is given (with `/<account>` appended when the host is an IP
 * address or a single-label name, the emulators' path-style addressing).
 */
export function blobTarget(settings: ConnectionSettings, tuning: BlobTuning): BlobTarget {
  const { container, prefix } = containerAndPrefix(settings.path);
  const credentials = settings.credentials;
  const pipeline: StoragePipelineOptions = {
    retryOptions: { maxTries: tuning.maxTries, tryTimeoutInMs: tuning.tryTimeoutMs, retryDelayInMs: 200, maxRetryDelayInMs: 2000 },
    userAgentOptions: { userAgentPrefix: 'xfer-agent' },
  };
  const connectionString = stringField(credentials, 'connection_string');
  let service: BlobServiceClient;
  if (connectionString) {
    try {
      service = BlobServiceClient.fromConnectionString(connectionString, pipeline);
    } catch (err) {
      // The SDK's message may quote the string (and so the key): say only what is wrong.
      throw new ConnectorError('AUTH', 'credentials.connection_string is not a valid Azure Storage connection string (AccountName and AccountKey, or BlobEndpoint and SharedAccessSignature)', { cause: err });
    }
  } else {
    const accountName = stringField(credentials, 'account_name');
    const accountKey = stringField(credentials, 'account_key');
    if (!accountName || !accountKey) throw new ConnectorError('AUTH', 'blob connections need credentials.connection_string, or credentials.account_name and credentials.account_key');
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(accountKey)) throw new ConnectorError('AUTH', 'credentials.account_key is not base64 (copy the key as the Azure portal shows it)');
    const suffix = typeof settings.options.endpoint_suffix === 'string' && settings.options.endpoint_suffix !== '' ? settings.options.endpoint_suffix : 'core.windows.net';
    service = new BlobServiceClient(accountUrl(accountName, settings.host, settings.port, suffix), new StorageSharedKeyCredential(accountName, accountKey), pipeline);
  }
  return { container, prefix, where: service.url.replace(/\?.*$/, '').replace(/\/$/, ''), service };
}

function accountUrl(account: string, host: string | null, port: number, suffix: string): string {
  if (!host) return `https://${account}.blob.${suffix}`;
  const bare = host.replace(/^\[|\]$/g, '');
  const shown = isIP(bare) === 6 ? `[${bare}]` : bare;
  const pathStyle = isIP(bare) !== 0 || !bare.includes('.');
  return `https://${shown}${port && port !== 443 ? `:${port}` : ''}${pathStyle ? `/${account}` : ''}`;
}

/** `/<container>[/<prefix>]` → container and prefix; refused without a container. */
export function containerAndPrefix(path: string): { container: string; prefix: string } {
  const segments = path.split('/').filter((s) => s !== '' && s !== '.');
  const container = segments.shift();
  if (!container) throw new ConnectorError('NOT_FOUND', "the connection's path must name a container: /<container>[/<prefix>]");
  return { container, prefix: segments.join('/') };
}

function stringField(record: Readonly<Record<string, unknown>>, key: string): string | undefined {
  const value = record[key];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

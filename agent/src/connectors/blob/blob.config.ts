import { BlobServiceClient, StorageSharedKeyCredential, type StoragePipelineOptions } from '@azure/storage-blob';
import type { ConnectionSettings } from '@xfer/shared';
import { closedAccess } from '../access.js';
import { azureAccount, azurePipelineOptions, displayUrl, guardedClient, invalidConnectionString, topAndRest, type AzureRetryTuning } from '../azure/azure.config.js';
import type { NetworkGuard } from '../network-guard.js';

/** Tuning of the blob connector (docs/connectors.md). */
export interface BlobTuning extends AzureRetryTuning {
  /** Files up to this size go in one Put Blob; larger ones, and streams of unknown length that reach it, in blocks. */
  blockBytes: number;
  /** Blocks staged at once per file: memory per write is about (queueBlocks + 1) × blockBytes. */
  queueBlocks: number;
  /** Blobs deleted at once by `remove`. */
  deleteParallel: number;
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
  /**
   * Who the connection is to the service, for server-side copies (blob.copy.ts): an HMAC, under
   * the account key, of the account name and endpoint. Two targets with equal values reach the
   * same account with the same key, however each was given (connection string, or name and key).
   * Null without a key (a SAS connection string): no copy can be authorized for it.
   */
  account: Buffer | null;
}

/** Reads a connection's settings into a target; the credentials as `azureAccount` (azure/azure.config.ts) reads them. */
export function blobTarget(settings: ConnectionSettings, tuning: BlobTuning, guard: NetworkGuard = closedAccess().network): BlobTarget {
  const { container, prefix } = containerAndPrefix(settings.path);
  const pipeline: StoragePipelineOptions = azurePipelineOptions(tuning);
  const account = azureAccount(settings, 'blob');
  const service = guardedClient((p: StoragePipelineOptions) => {
    if (account.kind === 'shared-key') return new BlobServiceClient(account.url, new StorageSharedKeyCredential(account.accountName, account.accountKey), p);
    try {
      return BlobServiceClient.fromConnectionString(account.connectionString, p);
    } catch (err) {
      throw invalidConnectionString('blob', err);
    }
  }, pipeline, guard);
  const where = displayUrl(service.url);
  const credential = service.credential;
  const identity = credential instanceof StorageSharedKeyCredential
    ? Buffer.from(credential.computeHMACSHA256(`xfer blob account\n${credential.accountName}\n${where}`), 'base64')
    : null;
  return { container, prefix, where, service, account: identity };
}

/** `/<container>[/<prefix>]` → container and prefix; refused without a container. */
export function containerAndPrefix(path: string): { container: string; prefix: string } {
  const { top, rest } = topAndRest(path, 'container');
  return { container: top, prefix: rest };
}

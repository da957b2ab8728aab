import { ShareServiceClient, StorageSharedKeyCredential, type ShareClient, type StoragePipelineOptions } from '@azure/storage-file-share';
import type { ConnectionSettings } from '@xfer/shared';
import { closedAccess } from '../access.js';
import { azureAccount, azurePipelineOptions, displayUrl, guardedClient, invalidConnectionString, topAndRest, type AzureRetryTuning } from '../azure/azure.config.js';
import type { NetworkGuard } from '../network-guard.js';

const MiB = 1024 * 1024;

/** Tuning of the fileshare connector (docs/connectors.md). */
export interface FileshareTuning extends AzureRetryTuning {
  /** Bytes per Put Range: at most 4 MiB, the service's limit. */
  rangeBytes: number;
  /** Ranges in flight per write: memory per write is about (queueRanges + 1) × rangeBytes. */
  queueRanges: number;
  /**
   * A write of unknown length grows the file (Set File Properties) by at least this much ahead of
   * the ranges, and cuts it to the bytes written at the end: one resize per this many bytes.
   */
  growBytes: number;
  /** Files deleted at once by `remove`, per directory. */
  deleteParallel: number;
  /** Entries per List Directories and Files page (at most 5,000). */
  listPage: number;
}

export const DEFAULT_FILESHARE_TUNING: FileshareTuning = {
  rangeBytes: 4 * MiB,
  queueRanges: 4,
  growBytes: 64 * MiB,
  deleteParallel: 16,
  listPage: 1000,
  maxTries: 3,
  tryTimeoutMs: 120_000,
};

/** Where a connection's files are, and a client to reach them. */
export interface FileshareTarget {
  share: string;
  /** Directory of the base path inside the share, without slashes at either end ('' for the share's root). */
  base: string;
  /** The account endpoint, for messages (no secrets: a SAS query string is cut off). */
  where: string;
  client: ShareClient;
}

/** Reads a connection's settings into a target; the credentials as `azureAccount` (azure/azure.config.ts) reads them. */
export function fileshareTarget(settings: ConnectionSettings, tuning: FileshareTuning, guard: NetworkGuard = closedAccess().network): FileshareTarget {
  const { top: share, rest: base } = topAndRest(settings.path, 'share');
  const pipeline: StoragePipelineOptions = azurePipelineOptions(tuning);
  const account = azureAccount(settings, 'file');
  const service = guardedClient((p: StoragePipelineOptions) => {
    if (account.kind === 'shared-key') return new ShareServiceClient(account.url, new StorageSharedKeyCredential(account.accountName, account.accountKey), p);
    try {
      return ShareServiceClient.fromConnectionString(account.connectionString, p);
    } catch (err) {
      throw invalidConnectionString('file', err);
    }
  }, pipeline, guard);
  return { share, base, where: displayUrl(service.url), client: service.getShareClient(share) };
}

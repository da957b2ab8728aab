import type { AgentToServer, FileResult, PayloadOf } from '@xfer/shared';
import type { CopyCounters } from '../copy/types.js';

export type ProgressPayload = PayloadOf<typeof AgentToServer, 'job.progress'>;
export type Counters = Pick<CopyCounters, 'files_total' | 'files_transferred' | 'files_skipped' | 'files_failed' | 'files_deleted' | 'bytes_transferred'>;

export const ZERO_COUNTERS: Counters = { files_total: 0, files_transferred: 0, files_skipped: 0, files_failed: 0, files_deleted: 0, bytes_transferred: 0 };

/** The protocol's counters of a run (a snapshot: the engine keeps counting). */
export function countersOf(c: Readonly<CopyCounters>): Counters {
  return {
    files_total: c.files_total, files_transferred: c.files_transferred, files_skipped: c.files_skipped,
    files_failed: c.files_failed, files_deleted: c.files_deleted, bytes_transferred: Math.max(0, c.bytes_transferred),
  };
}

export function progressPayload(jobId: string, c: Readonly<CopyCounters>, files: FileResult[]): ProgressPayload {
  return { job_id: jobId, ...countersOf(c), listing_done: c.listing_done, files };
}

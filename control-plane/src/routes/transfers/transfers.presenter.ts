import type { ExecuteTransferResult, Transfer, TransferFile, TransferMode, TransferStatus } from '@xfer/shared';
import type { TransferFileDoc } from '../../models/transfer-file.model.js';
import { presentedOptions, type StoredTransfer } from '../../plugins/app/transfers/index.js';

/** The read shape of a transfer; `queuePosition` from TransfersService.queuePositions (null unless it waits). */
export function presentTransfer(doc: StoredTransfer, queuePosition: number | null = null): Transfer {
  return {
    id: String(doc._id),
    name: doc.name,
    sourceConnectionId: String(doc.source_connection_id),
    sourcePath: doc.source_path,
    destinationConnectionId: String(doc.destination_connection_id),
    destinationPath: doc.destination_path,
    options: presentedOptions(doc.options),
    status: doc.status as TransferStatus,
    files_total: doc.files_total,
    files_transferred: doc.files_transferred,
    files_skipped: doc.files_skipped,
    files_failed: doc.files_failed,
    files_deleted: doc.files_deleted ?? 0,
    bytes_transferred: doc.bytes_transferred,
    started_at: doc.started_at ? doc.started_at.toISOString() : null,
    completed_at: doc.completed_at ? doc.completed_at.toISOString() : null,
    error: doc.error ?? null,
    cutoff: (doc.cutoff as Transfer['cutoff'] | null | undefined) ?? null,
    agent_id: doc.agent_id ? String(doc.agent_id) : null,
    mode: (doc.mode as TransferMode | null | undefined) ?? null,
    source_agent_id: doc.source_agent_id ? String(doc.source_agent_id) : null,
    attempt: doc.attempt,
    attempts: doc.attempt,
    queued_at: doc.queued_at ? doc.queued_at.toISOString() : null,
    queue_position: doc.status === 'queued' && doc.queued_at ? queuePosition : null,
    takeovers: doc.takeovers ?? 0,
    last_interruption: doc.last_interruption
      ? {
        attempt: doc.last_interruption.attempt,
        agent_id: doc.last_interruption.agent_id ? String(doc.last_interruption.agent_id) : null,
        reason: doc.last_interruption.reason,
        at: doc.last_interruption.at.toISOString(),
      }
      : null,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
  };
}

export function presentTransferFile(doc: TransferFileDoc): TransferFile {
  return {
    path: doc.path,
    attempt: doc.attempt,
    status: doc.status as TransferFile['status'],
    size: doc.size,
    sha256: doc.sha256 ?? null,
    verified_by: doc.verified_by ?? null,
    error: doc.error ?? null,
    reason: doc.reason ?? null,
    created_at: doc.created_at.toISOString(),
  };
}

/** The execute answer (api.md: bare, not in `data`); the details only when it did not succeed. */
export function executeResult(job: StoredTransfer): ExecuteTransferResult {
  const base = {
    success: job.status === 'completed', files_transferred: job.files_transferred, bytes_transferred: job.bytes_transferred,
    ...(job.files_deleted ? { files_deleted: job.files_deleted } : {}),
  };
  if (base.success) return base;
  return { ...base, status: job.status as TransferStatus, files_total: job.files_total, error: job.error ?? (job.status === 'cancelled' ? 'Transfer cancelled' : null) };
}

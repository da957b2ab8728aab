import type { Types } from 'mongoose';
import type { AgentToServer, PayloadOf } from '@xfer/shared';
import { oid, type Id, type StoredTransfer } from './transfer-states.js';
import { TransferQueueStates } from './queue-states.js';
import { onlyDuplicateKeys } from '../../../lib/duplicate-key.js';

type Counters = Pick<PayloadOf<typeof AgentToServer, 'job.completed'>,
  'files_total' | 'files_transferred' | 'files_skipped' | 'files_failed' | 'files_deleted' | 'bytes_transferred'>;

/** The counters to store; `files_deleted` 0 from an agent from before issue 25, which never deletes. */
function countersOf(p: Counters): Required<Counters> {
  return {
    files_total: p.files_total, files_transferred: p.files_transferred, files_skipped: p.files_skipped,
    files_failed: p.files_failed, files_deleted: p.files_deleted ?? 0, bytes_transferred: p.bytes_transferred,
  };
}

/**
 * The reports of a running job (plugins/app/agents/runs.ts) applied to its transfer: each only to
 * the run (agent, attempt) that sends it, as one conditional update, so a late or foreign report
 * changes nothing.
 */
export class TransferReports extends TransferQueueStates {
  /** Condition of a report from `agentId` about its run `attempt` of transfer `id`. */
  private running(id: Id, agentId: Id, attempt: number) {
    return { _id: oid(id), status: 'in-progress', agent_id: oid(agentId), attempt };
  }

  async accepted(id: string, agentId: string, attempt: number): Promise<boolean> {
    const now = new Date();
    const res = await this.write(id, () => this.o.db.transfers.updateOne(this.running(id, agentId, attempt), {
      $set: { accepted_at: now, updated_at: now },
    }));
    return res.matchedCount > 0;
  }

  /**
   * Counters are cumulative, so each message simply replaces them; file results are inserted.
   * `accountId` is the reporting agent's: an update, not a find-and-modify, as nothing of the transfer
   * needs reading back (FerretDB runs find-and-modify as a query plus a write).
   */
  async progress(id: string, agent: { id: string; accountId: string }, attempt: number, p: PayloadOf<typeof AgentToServer, 'job.progress'>): Promise<boolean> {
    const now = new Date();
    return this.write(id, async () => {
      const res = await this.o.db.transfers.updateOne(
        { ...this.running(id, agent.id, attempt), account_id: oid(agent.accountId) },
        { $set: { ...countersOf(p), updated_at: now } },
      );
      if (res.matchedCount === 0) return false;
      if (p.files.length > 0) await this.recordFiles(id, attempt, oid(agent.accountId), p.files, now);
      return true;
    });
  }

  /**
   * One document per (transfer, attempt, path), inserted in one unordered batch: a result sent twice
   * (a report re-sent after a reconnect) meets the unique index and is skipped. Plain inserts, as
   * upserts cost FerretDB a query and a write each. Lean: the documents are built complete and
   * typed here, and mongoose's casting and validation of each was most of the server's CPU on a
   * copy of small files.
   */
  private async recordFiles(id: string, attempt: number, accountId: Types.ObjectId, files: PayloadOf<typeof AgentToServer, 'job.progress'>['files'], now: Date): Promise<void> {
    const docs = files.map((f) => ({
      job_id: oid(id), attempt, path: f.path, account_id: accountId, created_at: now,
      status: f.status, size: f.size, sha256: f.sha256 ?? null, verified_by: f.verified_by ?? null, error: f.error ?? null,
      reason: f.reason ?? null,
    }));
    try {
      await this.o.db.transferFiles.insertMany(docs, { ordered: false, lean: true });
    } catch (err) {
      if (!onlyDuplicateKeys(err)) throw err;
    }
  }

  async completed(id: string, agentId: string, attempt: number, p: Counters): Promise<boolean> {
    return this.finish(id, agentId, attempt, { status: 'completed', error: null, ...countersOf(p) });
  }

  /**
   * The run failed. A run the agent refused before accepting it (busy, shutting down) never
   * started: it is taken over instead (`interrupt`), as is one the agent says was interrupted
   * (`job.failed.interrupted`, handled by runs.ts).
   */
  /**
   * The run failed. With `cutoff` (issue 25: its window or max_duration ended) the transfer fails
   * saying so, even before the run was accepted (one started outside its window): no takeover,
   * and a retry or the next scheduled run resumes from the verified files.
   */
  async failed(id: string, agentId: string, attempt: number, p: Counters & { error: string; cutoff?: 'window' | 'max_duration' }): Promise<boolean> {
    if (p.cutoff) return this.finish(id, agentId, attempt, { status: 'failed', error: p.error, cutoff: p.cutoff, ...countersOf(p) });
    const refused = await this.interrupt(id, attempt, `The agent refused the run: ${p.error}`, { agent_id: oid(agentId), accepted_at: null });
    if (refused) return true;
    return this.finish(id, agentId, attempt, { status: 'failed', error: p.error, ...countersOf(p) });
  }

  private async finish(id: string, agentId: string, attempt: number, set: Record<string, unknown>): Promise<boolean> {
    const now = new Date();
    const job = await this.write(id, () => this.o.db.transfers.findOneAndUpdate(
      this.running(id, agentId, attempt),
      { $set: { ...set, completed_at: now, lease: null, updated_at: now } },
      { new: true },
    ).lean<StoredTransfer>());
    if (!job) return false;
    await this.ended(job);
    return true;
  }
}

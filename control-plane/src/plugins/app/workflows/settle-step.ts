import { setTimeout as sleep } from 'node:timers/promises';
import type { Types } from 'mongoose';
import { MAX_SETTLE_FILES, type SettleAction, type SettleCounts, type SettleFile } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { AgentRequests, AgentsService } from '../agents/index.js';
import { runConnection, type StoredTransfer } from '../transfers/index.js';
import { AppError } from '../../../errors.js';
import { unvouched } from '../relay/vouched.js';

export interface SourceSettlerOptions {
  db: Models;
  agents: Pick<AgentsService, 'choose'>;
  requests: Pick<AgentRequests, 'settle'>;
}

/** What a move_source or delete_source step did: per-outcome counts, and why it failed (null when it did not). */
export interface Settlement {
  files: SettleCounts;
  error: string | null;
}

/** How often, and how long apart, a batch an agent was too busy for is sent again. */
const BUSY_RETRIES = 60;
const BUSY_RETRY_MS = 2_000;

/** Between batches: keep the run's lock, and stop when the run was cancelled. */
export interface SettleHooks {
  /** Called after each batch; resolves false to stop (the run was cancelled). */
  between(): Promise<boolean>;
  signal?: AbortSignal;
}

/** Why a file result's path cannot be settled: an agent reported it, so it is checked like any input. */
function pathProblem(path: string): string | null {
  if (path.includes('\\') || path.includes('\0')) return 'its path has a backslash or NUL';
  if (path.split('/').some((s) => s === '' || s === '.' || s === '..')) return 'its path has an empty, "." or ".." segment';
  return null;
}

const zero = (): SettleCounts => ({ moved: 0, deleted: 0, gone: 0, changed: 0, unverified: 0, failed: 0 });

/**
 * Moves or deletes the source files of a transfer whose copies were verified (the move_source and
 * delete_source steps; docs/automation.md "Workflows"). The files are the transfer's own results
 * for its last attempt: `copied`, or `skipped` as verified by an earlier attempt — each with
 * `verified_by` set by the agent that checked the copy at the destination. Anything else
 * (skipped because the destination had it, failed) stays where it is and is counted `unverified`.
 * A file of a relayed attempt whose source agent did not vouch for that path, size and SHA-256
 * (relay/vouched.ts) stays too, counted `failed` with the reason.
 * The files go in batches of MAX_SETTLE_FILES to an agent serving the source connection
 * (settle-protocol.ts), which checks each still has the size that was copied: memory and each
 * request stay bounded whatever the transfer's size.
 */
export class SourceSettler {
  constructor(private readonly o: SourceSettlerOptions) {}

  async settle(transfer: StoredTransfer, action: SettleAction, to: string | undefined, hooks: SettleHooks): Promise<Settlement> {
    const { db } = this.o;
    const files = zero();
    const failures: string[] = [];
    const connection = await db.connections.findOne(
      { _id: transfer.source_connection_id, account_id: transfer.account_id }, { name: 1, type: 1, agent_id: 1, agent_pool: 1 },
    ).lean();
    if (!connection) return { files, error: `the source connection ${String(transfer.source_connection_id)} was deleted` };
    let after: Types.ObjectId | null = null;
    for (;;) {
      const docs: Array<{ _id: Types.ObjectId; path: string; status: string; size: number; sha256?: string | null; verified_by?: string | null }> = await db.transferFiles.find(
        { job_id: transfer._id, attempt: transfer.attempt, ...(after ? { _id: { $gt: after } } : {}) },
        { path: 1, status: 1, size: 1, sha256: 1, verified_by: 1 },
      ).sort({ _id: 1 }).limit(MAX_SETTLE_FILES).lean();
      if (docs.length === 0) break;
      after = docs[docs.length - 1]!._id;
      const verified: typeof docs = [];
      for (const doc of docs) {
        const problem = pathProblem(doc.path);
        if (problem) {
          files.failed++;
          failures.push(`${doc.path}: ${problem}`);
        } else if (doc.status === 'failed' || !doc.verified_by) {
          files.unverified++;
        } else {
          verified.push(doc);
        }
      }
      // A relayed run's destination vouches only for the destination: the source agent's own record must match.
      const refused = await unvouched(db, transfer, verified);
      const batch: SettleFile[] = [];
      for (const doc of verified) {
        const why = refused.get(doc.path);
        if (why) {
          files.failed++;
          failures.push(`${doc.path}: ${why}`);
        } else {
          batch.push({ path: doc.path, size: doc.size });
        }
      }
      if (batch.length > 0) {
        const error = await this.send(transfer, connection, action, to, batch, files, failures, hooks.signal);
        if (error) return { files, error };
      }
      if (!(await hooks.between())) return { files, error: 'the run was cancelled' };
    }
    if (files.failed === 0) return { files, error: null };
    const verb = action === 'move' ? 'moved' : 'deleted';
    return { files, error: `${files.failed} file${files.failed === 1 ? '' : 's'} could not be ${verb} (first: ${failures[0]})` };
  }

  private ask(transfer: StoredTransfer, agentId: string, connectionId: string, action: SettleAction, to: string | undefined, files: SettleFile[], signal?: AbortSignal) {
    return this.o.requests.settle({
      accountId: String(transfer.account_id), agentId, connectionId, action, source_path: transfer.source_path, ...(to !== undefined ? { to } : {}), files,
    }, signal);
  }

  /** One batch to an agent serving the source connection; the error that stops the step, or null. */
  private async send(
    transfer: StoredTransfer, connection: Parameters<typeof runConnection>[0], action: SettleAction, to: string | undefined,
    batch: SettleFile[], files: SettleCounts, failures: string[], signal?: AbortSignal,
  ): Promise<string | null> {
    let agentId: string;
    try {
      agentId = String((await this.o.agents.choose(transfer.account_id, runConnection(connection), 'settle'))._id);
    } catch (err) {
      if (err instanceof AppError && err.statusCode < 500) return err.message;
      throw err;
    }
    let settled = await this.ask(transfer, agentId, String(connection._id), action, to, batch, signal);
    // An agent settling as many batches as it takes at once says so: asked again a little later.
    for (let tries = 0; settled.error?.startsWith('agent busy') && tries < BUSY_RETRIES && !signal?.aborted; tries++) {
      await sleep(BUSY_RETRY_MS, undefined, { signal }).catch(() => {});
      settled = await this.ask(transfer, agentId, String(connection._id), action, to, batch, signal);
    }
    if (settled.error) return settled.error;
    const byPath = new Map(settled.results.map((r) => [r.path, r]));
    for (const file of batch) {
      const result = byPath.get(file.path);
      if (!result) {
        files.failed++;
        failures.push(`${file.path}: the agent did not report it`);
        continue;
      }
      if (result.outcome === 'failed') failures.push(`${file.path}: ${result.error ?? 'failed'}`);
      files[result.outcome]++;
    }
    return null;
  }
}

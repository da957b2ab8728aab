import type { FastifyBaseLogger } from 'fastify';
import { Types } from 'mongoose';
import { FINISHED_TRANSFER_STATUSES, type AgentToServer, type PayloadOf } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { TransferDoc } from '../../../models/transfer.model.js';
import type { Outbox } from '../webhooks/outbox.js';
import { Notifier } from '../../../lib/notifier.js';
import { KeyedMutex } from '../../../lib/keyed-mutex.js';
import type { MetricsService } from '../metrics/index.js';

/** A transfer as stored; the agent protocol calls one run of it a job (plugins/app/agents/index.ts). */
export type StoredTransfer = TransferDoc & { _id: Types.ObjectId };
type Id = string | Types.ObjectId;
type Counters = Pick<PayloadOf<typeof AgentToServer, 'job.completed'>,
  'files_total' | 'files_transferred' | 'files_skipped' | 'files_failed' | 'bytes_transferred'>;

export interface TransferStatesOptions {
  db: Models;
  outbox: Outbox;
  leaseMs: number;
  log: FastifyBaseLogger;
  /** Counts the runs that end here, and what they moved. */
  metrics: Pick<MetricsService, 'transferEnded'>;
}

const oid = (id: Id) => (typeof id === 'string' ? new Types.ObjectId(id) : id);
const isObjectIdHex = (id: string) => /^[0-9a-f]{24}$/i.test(id);

function countersOf(p: Counters): Counters {
  return {
    files_total: p.files_total, files_transferred: p.files_transferred, files_skipped: p.files_skipped,
    files_failed: p.files_failed, bytes_transferred: p.bytes_transferred,
  };
}

const ZERO: Counters = { files_total: 0, files_transferred: 0, files_skipped: 0, files_failed: 0, bytes_transferred: 0 };

/**
 * The transfer state machine (queued → in-progress → completed, failed or cancelled; a retry
 * queues it again), the base of TransfersService (transfers.service.ts). Every change of state is
 * one conditional findOneAndUpdate (the condition names the state it leaves, and for agent reports
 * the agent and attempt), so two instances, a late agent message and an API call can race without
 * ever combining; the side effects (outbox event, wake-up of waiters) follow only the update that
 * won. Within this process, writes to one transfer also take its turn in a per-transfer queue
 * (lib/keyed-mutex.ts: FerretDB updates are not atomic).
 */
export class TransferStates {
  /** Notified with the transfer id after every change of state made by this instance. */
  readonly changes = new Notifier();
  private readonly locks = new KeyedMutex();

  constructor(protected readonly o: TransferStatesOptions) {}

  /** One write (or read-then-write) of transfer `id`, in turn with this process's other writes to it. */
  private write<T>(id: Id, section: () => Promise<T>): Promise<T> {
    return this.locks.run(String(id), section);
  }

  private lease(instanceId: string | null, now = new Date()) {
    return { instance_id: instanceId, expires_at: new Date(now.getTime() + this.o.leaseMs), renewed_at: now };
  }

  /** Condition of a report from `agentId` about its run `attempt` of transfer `id`. */
  private running(id: Id, agentId: Id, attempt: number) {
    return { _id: oid(id), status: 'in-progress', agent_id: oid(agentId), attempt };
  }

  /** Writes the event of a transfer that just ended and wakes its waiters. */
  private async ended(job: StoredTransfer): Promise<void> {
    const id = String(job._id);
    const summary = { id, files_transferred: job.files_transferred, bytes_transferred: job.bytes_transferred };
    this.o.metrics.transferEnded(job.status, job.bytes_transferred ?? 0, job.files_transferred ?? 0);
    if (job.status === 'completed') await this.o.outbox.emit(job.account_id, 'transfer.completed', summary);
    else await this.o.outbox.emit(job.account_id, 'transfer.failed', { ...summary, status: job.status, error: job.error ?? 'Transfer cancelled' });
    this.changes.notify(id);
  }

  /**
   * queued → in-progress on `agentId`. The instance holding the agent's socket sends `job.assign`;
   * until it claims the transfer, the lease runs from now, so one nobody picks up fails like one
   * whose agent went silent. Null when the transfer was not queued any more.
   */
  async start(job: StoredTransfer, agentId: Id): Promise<StoredTransfer | null> {
    const now = new Date();
    const started = await this.write(job._id, () => this.o.db.transfers.findOneAndUpdate(
      { _id: job._id, account_id: job.account_id, status: 'queued' },
      { $set: {
        status: 'in-progress', agent_id: oid(agentId), started_at: now, completed_at: null, error: null,
        assigned_at: null, accepted_at: null, lease: this.lease(null, now), updated_at: now,
      } },
      { new: true },
    ).lean<StoredTransfer>());
    if (!started) return null;
    await this.o.outbox.emit(job.account_id, 'transfer.started', {
      id: String(job._id), name: job.name, attempt: started.attempt, agent_id: String(agentId),
    });
    this.changes.notify(String(job._id));
    return started;
  }

  /**
   * queued or in-progress → cancelled. The agent of a running transfer is told by the instance
   * holding its socket (it notices on its next reconciliation). Null when it was in neither state.
   */
  async cancel(accountId: Id, id: Types.ObjectId): Promise<StoredTransfer | null> {
    const now = new Date();
    const cancelled = await this.write(id, () => this.o.db.transfers.findOneAndUpdate(
      { _id: id, account_id: oid(accountId), status: { $in: ['queued', 'in-progress'] } },
      { $set: { status: 'cancelled', completed_at: now, error: null, lease: null, updated_at: now } },
      { new: true },
    ).lean<StoredTransfer>());
    if (cancelled) await this.ended(cancelled);
    return cancelled;
  }

  /** failed or cancelled → queued, next attempt, counters cleared. Null when in another state. */
  async retry(accountId: Id, id: Types.ObjectId): Promise<StoredTransfer | null> {
    const now = new Date();
    const retried = await this.write(id, () => this.o.db.transfers.findOneAndUpdate(
      { _id: id, account_id: oid(accountId), status: { $in: ['failed', 'cancelled'] } },
      {
        $set: {
          status: 'queued', ...ZERO, started_at: null, completed_at: null, error: null, agent_id: null,
          assigned_at: null, accepted_at: null, lease: null, updated_at: now,
        },
        $inc: { attempt: 1 },
      },
      { new: true },
    ).lean<StoredTransfer>());
    if (retried) this.changes.notify(String(id));
    return retried;
  }

  /** Deletes a finished transfer and its per-file records. Null when it is not finished. */
  async remove(accountId: Id, id: Types.ObjectId): Promise<StoredTransfer | null> {
    const removed = await this.write(id, async () => {
      const doc = await this.o.db.transfers.findOneAndDelete({
        _id: id, account_id: oid(accountId), status: { $in: [...FINISHED_TRANSFER_STATUSES] },
      }).lean<StoredTransfer>();
      if (doc) await this.o.db.transferFiles.deleteMany({ job_id: id });
      return doc;
    });
    if (!removed) return null;
    this.changes.notify(String(id));
    return removed;
  }

  /**
   * in-progress → failed for the given run (`attempt`, optionally only on `agentId` or only while
   * `extra` holds). Used for lost agents, revoked agents and transfers that cannot be sent.
   */
  async fail(id: Id, attempt: number, error: string, extra: Record<string, unknown> = {}): Promise<StoredTransfer | null> {
    const now = new Date();
    const failed = await this.write(id, () => this.o.db.transfers.findOneAndUpdate(
      { _id: oid(id), status: 'in-progress', attempt, ...extra },
      { $set: { status: 'failed', error, completed_at: now, lease: null, updated_at: now } },
      { new: true },
    ).lean<StoredTransfer>());
    if (failed) await this.ended(failed);
    return failed;
  }

  /** Fails every in-progress transfer of `agentId` (the agent was revoked). */
  async failAllOfAgent(agentId: Id, error: string): Promise<number> {
    const jobs = await this.o.db.transfers.find({ status: 'in-progress', agent_id: oid(agentId) }, { attempt: 1 }).lean();
    let count = 0;
    for (const job of jobs) if (await this.fail(job._id, job.attempt, error, { agent_id: oid(agentId) })) count++;
    return count;
  }

  /**
   * The sweeper: fails in-progress transfers whose lease expired (their agent stopped responding). Any
   * instance may run it at any time: each failure is conditional on the lease still being expired.
   */
  async expireLeases(now = new Date()): Promise<number> {
    const expired = await this.o.db.transfers
      .find({ status: 'in-progress', 'lease.expires_at': { $lt: now } }, { attempt: 1, agent_id: 1, lease: 1 })
      .limit(200).lean();
    if (expired.length === 0) return 0;
    const agentIds = [...new Set(expired.map((j) => String(j.agent_id)))].map((id) => new Types.ObjectId(id));
    const names = new Map((await this.o.db.agents.find({ _id: { $in: agentIds } }, { name: 1 }).lean()).map((a) => [String(a._id), a.name]));
    let count = 0;
    for (const job of expired) {
      const since = job.lease?.renewed_at ?? now;
      const seconds = Math.max(1, Math.round((now.getTime() - since.getTime()) / 1000));
      const agent = names.get(String(job.agent_id)) ?? String(job.agent_id);
      const error = `Agent ${agent} stopped responding; the job was failed after ${seconds} s without contact`;
      if (await this.fail(job._id, job.attempt, error, { 'lease.expires_at': { $lt: now } })) count++;
    }
    return count;
  }

  /**
   * Extends the leases of the in-progress transfers of agents whose sockets this instance holds,
   * to `lease_ms` after each agent was last heard from: a transfer fails after exactly that long without
   * contact, however often this runs.
   */
  async renewLeases(agents: Array<{ id: string; lastContact: Date }>, instanceId: string): Promise<void> {
    if (agents.length === 0) return;
    const contact = new Map(agents.map((a) => [a.id, a.lastContact]));
    const jobs = await this.o.db.transfers.find({ status: 'in-progress', agent_id: { $in: agents.map((a) => oid(a.id)) } }, { agent_id: 1 }).lean();
    for (const { _id, agent_id } of jobs) {
      await this.write(_id, () => this.o.db.transfers.updateOne(
        { _id, status: 'in-progress', agent_id },
        { $set: { lease: this.lease(instanceId, contact.get(String(agent_id))) } },
      ));
    }
  }

  /**
   * Claims the in-progress transfers of these agents that still have to be sent as jobs
   * (`assigned_at` null), except `notYet`: each claim is a findOneAndUpdate, so exactly one
   * instance sends each once per attempt.
   */
  async claimForDispatch(agentIds: string[], instanceId: string, notYet: string[] = []): Promise<StoredTransfer[]> {
    if (agentIds.length === 0) return [];
    const candidates = await this.o.db.transfers
      // `notYet` holds ids agents reported (AgentSession.stopping): only those that can be job ids count.
      .find({ _id: { $nin: notYet.filter(isObjectIdHex).map(oid) }, status: 'in-progress', agent_id: { $in: agentIds.map(oid) }, assigned_at: null }, { attempt: 1, agent_id: 1 })
      .limit(100).lean();
    const claimed: StoredTransfer[] = [];
    for (const c of candidates) {
      const now = new Date();
      const job = await this.write(c._id, () => this.o.db.transfers.findOneAndUpdate(
        { _id: c._id, status: 'in-progress', agent_id: c.agent_id, attempt: c.attempt, assigned_at: null },
        { $set: { assigned_at: now, lease: this.lease(instanceId, now), updated_at: now } },
        { new: true },
      ).lean<StoredTransfer>());
      if (job) claimed.push(job);
    }
    return claimed;
  }

  /** Sends a claimed transfer back to the queue of its agent's instances (the agent lost it before accepting). */
  async unassign(id: Id, agentId: Id, attempt: number): Promise<void> {
    await this.write(id, () => this.o.db.transfers.updateOne({ ...this.running(id, agentId, attempt), accepted_at: null }, { $set: { assigned_at: null } }));
  }

  /** The state of these transfers, for reconciling what an agent runs with what it should run. */
  async states(ids: string[]): Promise<Map<string, Pick<StoredTransfer, 'status' | 'agent_id' | 'attempt' | 'assigned_at' | 'accepted_at'>>> {
    const docs = await this.o.db.transfers
      .find({ _id: { $in: ids.filter(isObjectIdHex).map(oid) } },
        { status: 1, agent_id: 1, attempt: 1, assigned_at: 1, accepted_at: 1 })
      .lean();
    return new Map(docs.map((d) => [String(d._id), d]));
  }

  /** In-progress transfers of an agent (for reconciliation when it says hello). */
  async runningOn(agentId: Id): Promise<StoredTransfer[]> {
    return this.o.db.transfers.find({ status: 'in-progress', agent_id: oid(agentId) }).lean<StoredTransfer[]>();
  }

  // ---- agent reports: applied only to the run (agent, attempt) that sends them ----

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
    }));
    try {
      await this.o.db.transferFiles.insertMany(docs, { ordered: false, lean: true });
    } catch (err) {
      const writeErrors = (err as { writeErrors?: Array<{ code?: number; err?: { code?: number } }> }).writeErrors;
      const duplicatesOnly = Array.isArray(writeErrors) && writeErrors.every((e) => (e.code ?? e.err?.code) === 11000);
      if (!duplicatesOnly && (err as { code?: number }).code !== 11000) throw err;
    }
  }

  async completed(id: string, agentId: string, attempt: number, p: Counters): Promise<boolean> {
    return this.finish(id, agentId, attempt, { status: 'completed', error: null, ...countersOf(p) });
  }

  async failed(id: string, agentId: string, attempt: number, p: Counters & { error: string }): Promise<boolean> {
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

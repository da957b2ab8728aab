import type { FastifyBaseLogger } from 'fastify';
import { Types } from 'mongoose';
import { FINISHED_TRANSFER_STATUSES } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { TransferDoc } from '../../../models/transfer.model.js';
import type { Outbox } from '../webhooks/outbox.js';
import { Notifier } from '../../../lib/notifier.js';
import { KeyedMutex } from '../../../lib/keyed-mutex.js';
import type { MetricsService } from '../metrics/index.js';
import { TransferQueue } from './queue.js';
import { AgentSlots } from './slots.js';

/** A transfer as stored; the agent protocol calls one run of it a job (plugins/app/agents/index.ts). */
export type StoredTransfer = TransferDoc & { _id: Types.ObjectId };
export type Id = string | Types.ObjectId;

export interface TransferStatesOptions {
  db: Models;
  outbox: Outbox;
  leaseMs: number;
  log: FastifyBaseLogger;
  /** Counts the runs that end here, what they moved, and the takeovers. */
  metrics: Pick<MetricsService, 'transferEnded' | 'transferTakenOver'>;
  /** Automatic takeovers of one transfer's runs (since its last execute or retry) before it fails instead. */
  maxTakeovers: number;
}

export const oid = (id: Id) => (typeof id === 'string' ? new Types.ObjectId(id) : id);
export const isObjectIdHex = (id: string) => /^[0-9a-f]{24}$/i.test(id);

/** The counters a new run starts from. */
export const ZERO_COUNTERS = { files_total: 0, files_transferred: 0, files_skipped: 0, files_failed: 0, files_deleted: 0, bytes_transferred: 0 };

/**
 * The transfer state machine, the base of TransfersService (transfers.service.ts): the
 * transitions of the API and of finished runs here, waiting, starts and takeovers in
 * queue-states.ts, agent reports in transfer-reports.ts. States: queued (created; with
 * `queued_at`: waiting for an agent) → in-progress → completed, failed or cancelled; a takeover
 * sends an in-progress run back to waiting as the next attempt; a retry queues a finished one again.
 *
 * Every change of the transfer document is one conditional findOneAndUpdate (the condition names
 * the state it leaves, and for agent reports the agent and attempt); the side effects (outbox
 * event, wake-up of waiters) follow only the update that won. Within this process, writes to one
 * transfer take turns (lib/keyed-mutex.ts: FerretDB updates are not atomic). What must happen once
 * across instances even on FerretDB is claimed by an insert or a delete instead: a transfer waits
 * while its `transfer_queue` entry exists (queue.ts: inserted by execute and by a takeover,
 * deleted by the one scheduler that starts it), and a run holds `agent_slots` (slots.ts).
 */
export class TransferStates {
  /** Notified with the transfer id after every change of state made by this instance. */
  readonly changes = new Notifier();
  /** The transfers waiting for an agent. */
  readonly queue: TransferQueue;
  /** The job slots the runs hold on agents. */
  readonly slots: AgentSlots;
  private readonly locks = new KeyedMutex();
  private readonly endListeners: Array<(job: StoredTransfer) => void> = [];

  constructor(protected readonly o: TransferStatesOptions) {
    this.queue = new TransferQueue(o.db);
    this.slots = new AgentSlots(o.db);
  }

  /** One write (or read-then-write) of transfer `id`, in turn with this process's other writes to it. */
  protected write<T>(id: Id, section: () => Promise<T>): Promise<T> {
    return this.locks.run(String(id), section);
  }

  protected lease(instanceId: string | null, now = new Date()) {
    return { instance_id: instanceId, expires_at: new Date(now.getTime() + this.o.leaseMs), renewed_at: now };
  }

  /** The transfer as stored now (by `_id` alone: FerretDB pushes only that down). */
  protected read(id: Id): Promise<StoredTransfer | null> {
    return this.o.db.transfers.collection.findOne<StoredTransfer>({ _id: oid(id) });
  }

  /**
   * Calls `listener` with every transfer this instance ends, right after its event is written
   * (a workflow run waiting for it goes on). Called synchronously and not awaited: a listener
   * starts its own work and contains its own failures; it must not hold up the report that ended the transfer.
   */
  onEnded(listener: (job: StoredTransfer) => void): void {
    this.endListeners.push(listener);
  }

  /** Writes the event of a transfer that just ended, releases its slots and wakes its waiters and listeners. */
  protected async ended(job: StoredTransfer): Promise<void> {
    const id = String(job._id);
    await this.slots.release(job._id);
    // files_deleted: what a sync deleted at the destination, a move at the source (docs/api.md "Events").
    const summary = { id, files_transferred: job.files_transferred, bytes_transferred: job.bytes_transferred, files_deleted: job.files_deleted ?? 0 };
    this.o.metrics.transferEnded(job.status, job.bytes_transferred ?? 0, job.files_transferred ?? 0);
    if (job.status === 'completed') await this.o.outbox.emit(job.account_id, 'transfer.completed', summary);
    else await this.o.outbox.emit(job.account_id, 'transfer.failed', { ...summary, status: job.status, error: job.error ?? 'Transfer cancelled', ...(job.cutoff ? { cutoff: job.cutoff } : {}) });
    this.changes.notify(id);
    for (const listener of this.endListeners) {
      try {
        listener(job);
      } catch (err) {
        this.o.log.error({ err, transferId: id }, 'a listener of ended transfers failed');
      }
    }
  }

  /**
   * queued (waiting or not) or in-progress → cancelled. The agent of a running transfer is told by
   * the instance holding its socket (it notices on its next reconciliation). Null when it was in neither state.
   */
  async cancel(accountId: Id, id: Types.ObjectId): Promise<StoredTransfer | null> {
    const now = new Date();
    const cancelled = await this.write(id, () => this.o.db.transfers.findOneAndUpdate(
      { _id: id, account_id: oid(accountId), status: { $in: ['queued', 'in-progress'] } },
      { $set: { status: 'cancelled', completed_at: now, error: null, lease: null, updated_at: now } },
      { new: true },
    ).lean<StoredTransfer>());
    if (cancelled) {
      await this.queue.remove(id);
      await this.ended(cancelled);
    }
    return cancelled;
  }

  /** failed or cancelled → queued (not waiting: execute it again), next attempt, counters cleared. Null when in another state. */
  async retry(accountId: Id, id: Types.ObjectId): Promise<StoredTransfer | null> {
    const now = new Date();
    const retried = await this.write(id, () => this.o.db.transfers.findOneAndUpdate(
      { _id: id, account_id: oid(accountId), status: { $in: ['failed', 'cancelled'] } },
      {
        $set: {
          status: 'queued', ...ZERO_COUNTERS, started_at: null, completed_at: null, error: null, cutoff: null, agent_id: null, mode: null, source_agent_id: null,
          queued_at: null, takeovers: 0, last_interruption: null, assigned_at: null, accepted_at: null, lease: null, updated_at: now,
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
      // Its plans go with it (plugins/app/plans/).
      if (doc) {
        const plans = (await this.o.db.transferPlans.find({ transfer_id: id }, { _id: 1 }).lean()).map((p) => p._id);
        if (plans.length > 0) await this.o.db.transferPlanBatches.deleteMany({ plan_id: { $in: plans } });
        await this.o.db.transferPlans.deleteMany({ transfer_id: id });
      }
      if (doc) await Promise.all([this.o.db.relaySentFiles.deleteMany({ job_id: id }), this.o.db.relayedAttempts.deleteMany({ job_id: id })]);
      return doc;
    });
    if (!removed) return null;
    // Nothing should be left of a finished transfer; a claim that outlived a crash is removed with it.
    await this.queue.remove(id);
    await this.slots.release(id);
    this.changes.notify(String(id));
    return removed;
  }

  /**
   * in-progress → failed for the given run (`attempt`, optionally only while `extra` holds). Used
   * for revoked agents, transfers that cannot be sent, and takeovers past their limit.
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

  /** Fails every in-progress transfer `agentId` runs or serves as a relay's source (the agent was revoked). */
  async failAllOfAgent(agentId: Id, error: string): Promise<number> {
    const jobs = await this.o.db.transfers.find(
      { status: 'in-progress', $or: [{ agent_id: oid(agentId) }, { source_agent_id: oid(agentId) }] }, { attempt: 1 },
    ).lean();
    let count = 0;
    for (const job of jobs) if (await this.fail(job._id, job.attempt, error)) count++;
    return count;
  }

  /**
   * Extends the leases of the in-progress transfers of agents whose sockets this instance holds,
   * to `lease_ms` after each agent was last heard from: a run is taken over after exactly that
   * long without contact, however often this runs.
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
    await this.write(id, () => this.o.db.transfers.updateOne(
      { _id: oid(id), status: 'in-progress', agent_id: oid(agentId), attempt, accepted_at: null }, { $set: { assigned_at: null } },
    ));
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
}

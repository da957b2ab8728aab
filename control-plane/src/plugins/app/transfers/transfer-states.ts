import type { FastifyBaseLogger } from 'fastify';
import { Types } from 'mongoose';
import { FINISHED_TRANSFER_STATUSES, type TransferMode } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { TransferDoc } from '../../../models/transfer.model.js';
import type { Outbox } from '../webhooks/outbox.js';
import { Notifier } from '../../../lib/notifier.js';
import { KeyedMutex } from '../../../lib/keyed-mutex.js';
import type { MetricsService } from '../metrics/index.js';
import { TransferQueue, type QueueEntry } from './queue.js';
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
export const ZERO_COUNTERS = { files_total: 0, files_transferred: 0, files_skipped: 0, files_failed: 0, bytes_transferred: 0 };

/**
 * How long a queue entry may wait for its transfer to catch up with it: `execute` and a takeover
 * insert the entry first (the exact claim) and change the transfer right after. A scheduler that
 * claims an entry whose transfer has not caught up puts it back within this grace, and drops it
 * after (the instance that inserted it died in between).
 */
export const CATCH_UP_MS = 30_000;

/** How a waiting transfer is to run: on which agent, its effective slot limit, and for a relay the source side's. */
export interface RunPlan {
  mode: TransferMode;
  /** The agent that runs the attempt: the one of a direct run, a relay's destination side. */
  agent: { id: string; limit: number };
  /** A relay's source side. */
  source?: { id: string; limit: number };
}

/**
 * `started`; `gone` (someone else claimed it, or it stopped waiting); `busy` (the agent's slots
 * are all held); `source-busy` (a relay's source agent's slots are all held).
 */
export type StartOutcome = { outcome: 'started'; job: StoredTransfer } | { outcome: 'gone' | 'busy' | 'source-busy' };

/** The queue entry of a transfer about to wait as attempt `attempt`. */
function entryOf(job: StoredTransfer, attempt: number, queuedAt: Date, now: Date): QueueEntry {
  return {
    _id: job._id, account_id: job.account_id, queued_at: queuedAt, attempt,
    source_connection_id: job.source_connection_id, destination_connection_id: job.destination_connection_id,
    entered_at: now, orphaned_since: null,
  };
}

/**
 * The transfer state machine, the base of TransfersService (transfers.service.ts; agent reports
 * in transfer-reports.ts). States: queued (created; with `queued_at`: waiting for an agent) →
 * in-progress → completed, failed or cancelled; a takeover sends an in-progress run back to
 * waiting as the next attempt; a retry queues a finished one again.
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

  /** Writes the event of a transfer that just ended, releases its slots and wakes its waiters. */
  protected async ended(job: StoredTransfer): Promise<void> {
    const id = String(job._id);
    await this.slots.release(job._id);
    const summary = { id, files_transferred: job.files_transferred, bytes_transferred: job.bytes_transferred };
    this.o.metrics.transferEnded(job.status, job.bytes_transferred ?? 0, job.files_transferred ?? 0);
    if (job.status === 'completed') await this.o.outbox.emit(job.account_id, 'transfer.completed', summary);
    else await this.o.outbox.emit(job.account_id, 'transfer.failed', { ...summary, status: job.status, error: job.error ?? 'Transfer cancelled' });
    this.changes.notify(id);
  }

  /**
   * queued (never executed, or retried) → waiting for an agent: `queued_at` set and a queue entry.
   * The entry's insert is the claim, so of two executes (on any instances) one wins; null for the
   * other, and when the transfer was not in that state.
   */
  async enqueue(job: StoredTransfer): Promise<StoredTransfer | null> {
    if (job.status !== 'queued' || job.queued_at) return null;
    const now = new Date();
    if (!(await this.queue.add(entryOf(job, job.attempt, now, now)))) {
      // An entry left by an execute that died before it changed the transfer is adopted once the grace is over.
      const left = await this.queue.get(job._id);
      if (!left || left.attempt !== job.attempt || now.getTime() - left.entered_at.getTime() < CATCH_UP_MS) return null;
      await this.queue.remove(job._id);
      if (!(await this.queue.add(entryOf(job, job.attempt, now, now)))) return null;
    }
    const waiting = await this.write(job._id, () => this.o.db.transfers.findOneAndUpdate(
      { _id: job._id, account_id: job.account_id, status: 'queued', attempt: job.attempt, queued_at: null },
      { $set: { queued_at: now, takeovers: 0, last_interruption: null, updated_at: now } },
      { new: true },
    ).lean<StoredTransfer>());
    if (!waiting) {
      await this.queue.claim(job._id, job.attempt);
      return null;
    }
    this.changes.notify(String(job._id));
    return waiting;
  }

  /**
   * Starts a waiting transfer as `plan` says, for the scheduler of the instance holding the socket
   * of `plan.agent` (plugins/app/agents/scheduler.ts). In order, each step exact across instances:
   * claim the queue entry (delete), claim the agent's slot (and a relay source's) by insert, then
   * move the transfer to in-progress. A step that fails undoes the ones before: the slots are
   * released and the entry put back, unless the transfer stopped waiting meanwhile. The lease runs
   * from the start, so a run nobody sends is taken over like one whose agent went silent.
   */
  async startWaiting(entry: QueueEntry, plan: RunPlan, instanceId: string): Promise<StartOutcome> {
    if (!(await this.queue.claim(entry._id, entry.attempt))) return { outcome: 'gone' };
    const claim = { accountId: entry.account_id, jobId: entry._id, attempt: entry.attempt, instanceId };
    const run = await this.slots.claim({ ...claim, agentId: plan.agent.id, limit: plan.agent.limit, role: 'run' });
    if (run !== 'claimed') {
      if (run === 'taken') return { outcome: 'gone' };
      await this.putBack(entry);
      return { outcome: 'busy' };
    }
    if (plan.source) {
      const source = await this.slots.claim({ ...claim, agentId: plan.source.id, limit: plan.source.limit, role: 'source' });
      if (source !== 'claimed') {
        await this.slots.release(entry._id, entry.attempt);
        if (source === 'taken') return { outcome: 'gone' };
        await this.putBack(entry);
        return { outcome: 'source-busy' };
      }
    }
    const started = await this.start(entry, plan);
    if (!started) {
      await this.slots.release(entry._id, entry.attempt);
      if (await this.catchingUp(entry)) await this.putBack(entry);
      return { outcome: 'gone' };
    }
    return { outcome: 'started', job: started };
  }

  /** waiting → in-progress as `plan` says; null when the transfer is not waiting as that attempt. */
  private async start(entry: QueueEntry, plan: RunPlan): Promise<StoredTransfer | null> {
    const now = new Date();
    const started = await this.write(entry._id, () => this.o.db.transfers.findOneAndUpdate(
      { _id: entry._id, account_id: entry.account_id, status: 'queued', attempt: entry.attempt, queued_at: { $ne: null } },
      { $set: {
        status: 'in-progress', agent_id: oid(plan.agent.id), mode: plan.mode, source_agent_id: plan.source ? oid(plan.source.id) : null,
        started_at: now, completed_at: null, error: null, assigned_at: null, accepted_at: null, lease: this.lease(null, now), updated_at: now,
      } },
      { new: true },
    ).lean<StoredTransfer>());
    if (!started) return null;
    await this.o.outbox.emit(started.account_id, 'transfer.started', {
      id: String(started._id), name: started.name, attempt: started.attempt, agent_id: plan.agent.id,
    });
    this.changes.notify(String(started._id));
    return started;
  }

  /**
   * True while the transfer of an entry has not caught up with it yet (within CATCH_UP_MS of its
   * insert): an execute that has not set `queued_at`, or a takeover that has not ended the attempt before.
   */
  async catchingUp(entry: QueueEntry): Promise<boolean> {
    if (Date.now() - entry.entered_at.getTime() > CATCH_UP_MS) return false;
    const job = await this.read(entry._id);
    if (!job) return false;
    return (job.status === 'queued' && !job.queued_at && job.attempt === entry.attempt)
      || (job.status === 'in-progress' && job.attempt === entry.attempt - 1);
  }

  /** Puts a claimed entry back, unless its transfer stopped waiting meanwhile (a cancel between the claim and now removed nothing). */
  private async putBack(entry: QueueEntry): Promise<void> {
    if (!(await this.queue.add(entry))) return;
    const job = await this.read(entry._id);
    if (job?.status === 'queued' && job.attempt === entry.attempt) return;
    if (job?.status === 'in-progress' && job.attempt === entry.attempt - 1) return;
    await this.queue.claim(entry._id, entry.attempt);
  }

  /**
   * The one takeover entry point: run `attempt` of transfer `id` (in progress, and matching
   * `extra`) ends, and the transfer waits again as `attempt + 1`, keeping its place in the queue
   * (`queued_at`), with `reason` kept in `last_interruption`; the run's slots are released and its
   * agent is told to stop by the instance holding its socket (runs.ts reconcile). Nothing terminal
   * is emitted: the next run resumes (`resume: true`). Past `maxTakeovers` takeovers, the
   * transfer fails with `reason` instead. The entry's insert is the claim: of two instances
   * taking one run over, one does it (null for the other, and when the run was not current).
   */
  async interrupt(id: Id, attempt: number, reason: string, extra: Record<string, unknown> = {}): Promise<StoredTransfer | null> {
    const _id = oid(id);
    const job = await this.o.db.transfers.collection.findOne<StoredTransfer>({ _id, status: 'in-progress', attempt, ...extra });
    if (!job) return null;
    const takeovers = job.takeovers ?? 0;
    if (takeovers >= this.o.maxTakeovers) {
      const why = this.o.maxTakeovers === 0
        ? 'automatic takeovers are off (XFER_JOB_MAX_TAKEOVERS=0)'
        : `not taken over again after ${takeovers} takeovers (XFER_JOB_MAX_TAKEOVERS)`;
      return this.fail(_id, attempt, `${reason}; ${why}`, extra);
    }
    const now = new Date();
    const queuedAt = job.queued_at ?? now;
    const entry = entryOf(job, attempt + 1, queuedAt, now);
    if (!(await this.queue.add(entry))) {
      // Another instance is taking it over now; or one died after inserting the entry (adopted once the grace is over).
      const left = await this.queue.get(_id);
      if (!left || left.attempt !== attempt + 1 || now.getTime() - left.entered_at.getTime() < CATCH_UP_MS) return null;
    }
    const next = await this.write(_id, () => this.o.db.transfers.findOneAndUpdate(
      { _id, status: 'in-progress', attempt, ...extra },
      { $set: {
        status: 'queued', attempt: attempt + 1, queued_at: queuedAt, takeovers: takeovers + 1,
        last_interruption: { attempt, agent_id: job.agent_id ?? null, reason, at: now },
        ...ZERO_COUNTERS, agent_id: null, mode: null, source_agent_id: null, started_at: null, completed_at: null, error: null,
        assigned_at: null, accepted_at: null, lease: null, updated_at: now,
      } },
      { new: true },
    ).lean<StoredTransfer>());
    if (!next) {
      await this.queue.claim(_id, attempt + 1);
      return null;
    }
    await this.slots.release(_id, attempt);
    this.o.metrics.transferTakenOver();
    this.o.log.info({ jobId: String(_id), attempt, reason }, 'run interrupted: the transfer waits to be taken over');
    this.changes.notify(String(_id));
    return next;
  }

  /**
   * A waiting transfer that no agent can run fails (the orphan sweeper, plugins/app/agents/
   * scheduler.ts): its entry is claimed first, so it fails once and never also starts.
   */
  async failWaiting(entry: QueueEntry, error: string): Promise<StoredTransfer | null> {
    if (!(await this.queue.claim(entry._id, entry.attempt))) return null;
    const now = new Date();
    const failed = await this.write(entry._id, () => this.o.db.transfers.findOneAndUpdate(
      { _id: entry._id, status: 'queued', attempt: entry.attempt, queued_at: { $ne: null } },
      { $set: { status: 'failed', error, completed_at: now, lease: null, updated_at: now } },
      { new: true },
    ).lean<StoredTransfer>());
    if (failed) await this.ended(failed);
    return failed;
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
          status: 'queued', ...ZERO_COUNTERS, started_at: null, completed_at: null, error: null, agent_id: null, mode: null, source_agent_id: null,
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
   * The sweeper: takes over the runs whose lease expired (their agent stopped responding). Any
   * instance may run it at any time: each takeover is conditional on the lease still being expired.
   */
  async expireLeases(now = new Date()): Promise<number> {
    const expired = await this.o.db.transfers
      .find({ status: 'in-progress', 'lease.expires_at': { $lt: now } }, { attempt: 1, agent_id: 1, lease: 1 })
      .limit(200).lean();
    if (expired.length === 0) return 0;
    const agentIds = [...new Set(expired.map((j) => String(j.agent_id)))].filter(isObjectIdHex).map((id) => new Types.ObjectId(id));
    const names = new Map((await this.o.db.agents.find({ _id: { $in: agentIds } }, { name: 1 }).lean()).map((a) => [String(a._id), a.name]));
    let count = 0;
    for (const job of expired) {
      const since = job.lease?.renewed_at ?? now;
      const seconds = Math.max(1, Math.round((now.getTime() - since.getTime()) / 1000));
      const agent = names.get(String(job.agent_id)) ?? String(job.agent_id);
      const reason = `Agent ${agent} stopped responding (${seconds} s without contact)`;
      if (await this.interrupt(job._id, job.attempt, reason, { 'lease.expires_at': { $lt: now } })) count++;
    }
    return count;
  }

  /**
   * Releases slots whose run is over (the transfer is not in progress as that attempt) and that
   * are older than CATCH_UP_MS (a claim is followed by its start within moments): left by an
   * instance that died between a claim and the start, or by a release that failed. One read per
   * running transfer: what the fleet runs, never the history.
   */
  async sweepSlots(now = new Date()): Promise<number> {
    return this.slots.sweep(new Date(now.getTime() - CATCH_UP_MS), async (held) => {
      const live = new Set<string>();
      for (const jobId of new Set(held.map((s) => String(s.job_id)))) {
        const job = await this.read(jobId);
        for (const s of held) {
          if (String(s.job_id) === jobId && job?.status === 'in-progress' && job.attempt === s.attempt) live.add(String(s._id));
        }
      }
      return live;
    });
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

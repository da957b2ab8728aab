import { Types } from 'mongoose';
import type { TransferMode } from '@xfer/shared';
import type { QueueEntry } from './queue.js';
import { needsSync } from './options.js';
import { TransferStates, ZERO_COUNTERS, isObjectIdHex, oid, type Id, type StoredTransfer } from './transfer-states.js';

/**
 * How long a queue entry may wait for its transfer to catch up with it: `execute` and a takeover
 * insert the entry first (the exact claim) and change the transfer right after. A scheduler that
 * claims an entry whose transfer has not caught up puts it back within this grace, and drops it
 * after (the instance that inserted it died in between).
 */
export const CATCH_UP_MS = 30_000;

/**
 * How long a transfer taken over for the n-th time (n ≥ 2) waits before it may start again:
 * 1 s, 2 s, 4 s, … up to 30 s. A first takeover starts at once (an agent lost, the lease over:
 * failover is what the pool is for); the ones after add up past the online window of a session
 * whose instance died (hub.ts `onlineWindowMs`), within which such an agent may still be chosen.
 */
export function takeoverBackoffMs(takeovers: number): number {
  return takeovers <= 1 ? 0 : Math.min(30_000, 1_000 * 2 ** (takeovers - 2));
}

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
function entryOf(job: StoredTransfer, attempt: number, queuedAt: Date, now: Date, notBefore: Date | null = null): QueueEntry {
  return {
    _id: job._id, account_id: job.account_id, queued_at: queuedAt, attempt,
    source_connection_id: job.source_connection_id, destination_connection_id: job.destination_connection_id,
    needs_sync: needsSync(job.options, job.plan_id), direct_only: !!job.plan_id,
    entered_at: now, orphaned_since: null, not_before: notBefore,
  };
}

/**
 * The queue side of the transfer state machine: a transfer waits (`enqueue`), starts on an agent's
 * free slot (`startWaiting`, called by the scheduler), is taken over (`interrupt`, and the lease
 * sweeper), or fails waiting (`failWaiting`, the orphan sweep). Each step is claimed through the
 * queue entry and the slots first (exact across instances on FerretDB), then the transfer document
 * follows with a conditional update.
 */
export class TransferQueueStates extends TransferStates {
  /**
   * queued (never executed, or retried) → waiting for an agent: `queued_at` set and a queue entry.
   * The entry's insert is the claim, so of two executes (on any instances) one wins; null for the
   * other, and when the transfer was not in that state.
   */
  async enqueue(queued: StoredTransfer, planId: Types.ObjectId | null = null): Promise<StoredTransfer | null> {
    if (queued.status !== 'queued' || queued.queued_at) return null;
    // The plan this execute applies (none: a plain run), in the entry and the transfer alike.
    const job = { ...queued, plan_id: planId };
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
      { $set: { queued_at: now, plan_id: planId, takeovers: 0, last_interruption: null, updated_at: now } },
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
    try {
      return await this.startClaimed(entry, plan, instanceId);
    } catch (err) {
      // A write after the claim failed (the database unreachable for a moment): unless the start
      // went through after all, undo the claims so the transfer waits on instead of being lost
      // with its slots held. What cannot be undone now, the sweeps repair (sweepSlots, requeueLost).
      await this.undoFailedStart(entry).catch(() => undefined);
      throw err;
    }
  }

  private async undoFailedStart(entry: QueueEntry): Promise<void> {
    const job = await this.read(entry._id);
    if (job?.status === 'in-progress' && job.attempt === entry.attempt) return;
    await this.slots.release(entry._id, entry.attempt);
    await this.putBack(entry);
  }

  private async startClaimed(entry: QueueEntry, plan: RunPlan, instanceId: string): Promise<StartOutcome> {
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
      if (await this.waitsAgain(entry)) await this.putBack(entry);
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
   * Whether a claimed entry whose start found the transfer not waiting goes back to the queue: the
   * transfer has caught up with it since (it waits as that attempt now: the execute or takeover
   * that inserted the entry changed the transfer between the start's read and this one), or is
   * still catching up within CATCH_UP_MS of the insert (an execute that has not set `queued_at`,
   * a takeover that has not ended the attempt before). Not after that grace: the instance that
   * inserted the entry died in between.
   */
  async waitsAgain(entry: QueueEntry): Promise<boolean> {
    const job = await this.read(entry._id);
    if (!job) return false;
    if (job.status === 'queued' && job.queued_at && job.attempt === entry.attempt) return true;
    if (Date.now() - entry.entered_at.getTime() > CATCH_UP_MS) return false;
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
    const backoffMs = takeoverBackoffMs(takeovers + 1);
    const entry = entryOf(job, attempt + 1, queuedAt, now, backoffMs > 0 ? new Date(now.getTime() + backoffMs) : null);
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
   * Makes a waiting transfer that lost its queue entry wait again: the instance that claimed the
   * entry died (or its database writes failed) before it started the run. A transfer waits while
   * it is queued with `queued_at` set; its entry is missing only for the moment between a
   * scheduler's claim and its start, so one missing on two sweeps in a row (`missing`, kept by
   * the caller between sweeps) is lost, and gets its entry again. Costs what waits, never the
   * history. Returns how many it put back.
   */
  async requeueLost(missing: Set<string>, now = new Date()): Promise<number> {
    const waiting = await this.o.db.transfers.collection
      .find<StoredTransfer>({ status: 'queued', queued_at: { $gt: new Date(0) } })
      .project<StoredTransfer>({ account_id: 1, attempt: 1, queued_at: 1, source_connection_id: 1, destination_connection_id: 1, options: 1, plan_id: 1 })
      .toArray();
    const entries = new Set<string>();
    for (let i = 0; i < waiting.length; i += 1000) {
      const ids = waiting.slice(i, i + 1000).map((j) => j._id);
      for (const e of await this.o.db.transferQueue.find({ _id: { $in: ids } }, { _id: 1 }).lean()) entries.add(String(e._id));
    }
    const seenBefore = new Set(missing);
    missing.clear();
    let requeued = 0;
    for (const job of waiting) {
      const id = String(job._id);
      if (entries.has(id)) continue;
      if (!seenBefore.has(id)) {
        missing.add(id);
        continue;
      }
      if (await this.queue.add(entryOf(job, job.attempt, job.queued_at!, now))) {
        requeued++;
        this.o.log.warn({ jobId: id, attempt: job.attempt }, 'a waiting transfer had lost its queue entry (an instance died while starting it): it waits again');
      }
    }
    return requeued;
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
}

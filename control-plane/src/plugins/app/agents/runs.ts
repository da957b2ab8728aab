import type { FastifyBaseLogger } from 'fastify';
import { Types } from 'mongoose';
import type { AgentMessage } from '@xfer/shared';
import type { TransfersService } from '../transfers/index.js';
import type { AgentSession } from './session.js';
import type { Events, HubEvents } from './events.js';

/** Reports on a run (the resume lookup `job.verified.query` is a request, answered by verified-lookup.ts). */
type JobReport = Exclude<Extract<AgentMessage, { type: `job.${string}` }>, { type: 'job.verified.query' | 'job.plan.query' }>;
type Progress = Extract<AgentMessage, { type: 'job.progress' }>['payload'];

/** Progress of one run not yet written, and the writer draining it. */
interface PendingProgress {
  attempt: number;
  next: Progress | null;
  /** Sequence numbers of the reports merged into `next`, acknowledged once it is written. */
  seqs: number[];
  writer: Promise<void>;
  /** Ends the wait for more reports, and those to come: the run's end arrived, nothing more will join. */
  flush: () => void;
  ending: boolean;
}

/**
 * How long a progress write waits for more reports of the same run to join it. An agent copying
 * small files reports 100 times a second (every 5 files); each write is an update plus an insert,
 * and on FerretDB they cost the control plane as much CPU as the agent spent copying. Waiting this
 * long makes a write carry ~50 files instead of ~5, and delays what the API shows by no more.
 */
const PROGRESS_LINGER_MS = 100;
/**
 * File results of one run waiting for the database, at most: past it the report waits for the
 * write (the session's queue, then its socket, stop reading) instead of growing server memory
 * while the database is slow. Results are never dropped for it: they must be persisted.
 */
export const MAX_PENDING_FILES = 2_000;
/** How long a stopped run may take to report its end before the job may go to the same agent again. */
const STOP_ACK_MS = 10_000;
/** How long after the welcome jobs the agent did not list are settled when the resync ping goes unanswered. */
const RESYNC_GRACE_MS = 10_000;

export interface AgentRunsOptions {
  /** The state machine every report is applied to (a job here is a run of a transfer there). */
  transfers: TransfersService;
  instanceId: string;
  heartbeatMs: number;
  log: FastifyBaseLogger;
  /** The hub's events: `ready` when a session may have jobs to be sent (again). */
  events: Events<HubEvents>;
}

/** Terminal reports are worth a few tries: losing one would leave the job to the lease sweeper. */
async function withRetries<T>(fn: () => Promise<T>, tries = 3): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (err) {
      if (i >= tries) throw err;
      await new Promise((resolve) => setTimeout(resolve, 200 * i));
    }
  }
}

/**
 * What each connected agent runs (`AgentSession.jobs`, `.unconfirmed`, `.stopping`) kept in line
 * with the database: reports apply only to the run an agent was given; runs the database no longer
 * wants are stopped; after a reconnect, the agent's list of running jobs is reconciled.
 */
export class AgentRuns {
  constructor(private readonly o: AgentRunsOptions) {}

  /** Per session, per job: progress reports waiting for the database (see `queueProgress`). */
  private readonly pending = new WeakMap<AgentSession, Map<string, PendingProgress>>();
  /** Per session: sequence numbers of reports applied in this turn of the event loop, to acknowledge together. */
  private readonly acks = new WeakMap<AgentSession, number[]>();

  /**
   * Acknowledges numbered reports once they are persisted (or change nothing: a run no longer
   * wanted, a duplicate): the agent keeps each report until then and sends it again after a
   * reconnect, so a report lost with a socket or a crashed instance is never lost for good.
   * Acks of one turn go out together, at most 1000 per frame (the protocol's cap).
   */
  private ack(session: AgentSession, seqs: ReadonlyArray<number | undefined>): void {
    if (!session.hello?.acks) return;
    const numbered = seqs.filter((seq): seq is number => seq !== undefined);
    if (numbered.length === 0) return;
    let queued = this.acks.get(session);
    if (!queued) {
      const batch: number[] = (queued = []);
      this.acks.set(session, batch);
      setImmediate(() => {
        this.acks.delete(session);
        for (let i = 0; i < batch.length; i += 1000) session.send('ack', { seqs: batch.slice(i, i + 1000) });
      });
    }
    queued.push(...numbered);
  }

  /**
   * Progress is written by one writer per job, merging every report that arrived while the
   * previous write was in flight (latest cumulative counters, all file results), instead of
   * one write per report. Reports then never queue up behind the database: an agent copying
   * hundreds of small files a second would otherwise outrun it, its session would stop reading
   * (backpressure), and neither its frames nor its pongs would be seen until the lease expired.
   * The persisted counters trail the agent by at most one write and `PROGRESS_LINGER_MS`.
   */
  private async queueProgress(session: AgentSession, id: string, attempt: number, progress: Progress): Promise<void> {
    let byJob = this.pending.get(session);
    if (!byJob) this.pending.set(session, (byJob = new Map()));
    const entry = byJob.get(id);
    if (entry && entry.attempt === attempt) {
      entry.next = entry.next ? { ...progress, files: [...entry.next.files, ...progress.files] } : progress;
      if (progress.seq !== undefined) entry.seqs.push(progress.seq);
      if (entry.next.files.length >= MAX_PENDING_FILES) {
        // Back-pressure: write now and take nothing more from this agent until it is written.
        entry.flush();
        await entry.writer;
      }
      return;
    }
    const fresh: PendingProgress = {
      attempt, next: progress, seqs: progress.seq === undefined ? [] : [progress.seq], writer: Promise.resolve(), flush: () => undefined, ending: false,
    };
    fresh.writer = (async () => {
      while (fresh.next) {
        // Let the reports arriving meanwhile join this write.
        if (!fresh.ending) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, PROGRESS_LINGER_MS);
            fresh.flush = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
        const batch = fresh.next;
        const seqs = fresh.seqs;
        fresh.next = null;
        fresh.seqs = [];
        try {
          if (!(await this.o.transfers.progress(id, session.agent, attempt, batch))) this.stop(session, id);
          this.ack(session, seqs);
        } catch (err) {
          // Not acknowledged: the agent sends these reports (their file results) again after its next reconnect.
          // A failed progress write is not fatal: the next report carries the counters again.
          this.o.log.warn({ err, jobId: id }, 'could not record job progress');
        }
      }
      if (byJob.get(id) === fresh) byJob.delete(id);
    })().catch((err: unknown) => {
      // Nobody may be waiting on the writer: a rejection must not go unhandled.
      this.o.log.error({ err, jobId: id }, 'job progress writer failed');
      if (byJob.get(id) === fresh) byJob.delete(id);
    });
    byJob.set(id, fresh);
  }

  /** Waits until every progress report of the job received so far is written. */
  private async progressWritten(session: AgentSession, id: string): Promise<void> {
    const entry = this.pending.get(session)?.get(id);
    if (entry) {
      entry.ending = true;
      entry.flush();
      await entry.writer;
    }
  }

  /** The request id of the resync ping sent right after a welcome. */
  resyncId(session: AgentSession): string {
    return `resync-${session.sessionId}`.slice(0, 64);
  }

  /**
   * At hello: the jobs the agent still runs and the database still wants on it (current attempt,
   * already sent) keep going; the agent aborts the rest (returned, for `welcome.abort_jobs`). Jobs
   * sent to the agent that it does not list may have ended while it was away (their reports follow
   * the welcome): they are settled after the resync ping (`settle`), unless the agent says it holds
   * reports of them (`heldJobs`: an agent that acknowledges reports keeps them until they are
   * persisted, so they come, however many, and however long the resync ping waits for them).
   */
  async adopt(session: AgentSession, runningJobs: string[], heldJobs: string[] = []): Promise<string[]> {
    const agentId = session.agent.id;
    const running = new Set([...runningJobs, ...heldJobs]);
    const abort = new Set(runningJobs);
    for (const job of await this.o.transfers.runningOn(agentId)) {
      const id = String(job._id);
      if (!job.assigned_at) continue; // still to be sent, by the dispatcher; a run the agent has of it is an older one
      session.jobs.set(id, job.attempt);
      if (running.has(id)) abort.delete(id);
      else session.unconfirmed.add(id);
    }
    if (session.jobs.size > 0) await this.o.transfers.renewLeases([{ id: agentId, lastContact: session.lastHeardAt }], this.o.instanceId);
    for (const id of abort) session.markStopping(id);
    return [...abort];
  }

  /**
   * After the welcome went out. The agent sends the reports it held while disconnected right
   * after the welcome, so they arrive before this ping's pong, which settles the unlisted jobs.
   */
  startResync(session: AgentSession): void {
    if (session.unconfirmed.size === 0) return;
    session.resyncDeadline = Date.now() + Math.max(RESYNC_GRACE_MS, 3 * this.o.heartbeatMs);
    session.send('ping', { request_id: this.resyncId(session) });
  }

  /**
   * Jobs the agent neither listed at hello nor reported on since: sent again if it never accepted
   * them, taken over if it did (it lost them, e.g. it restarted: the next run resumes them).
   */
  async settle(session: AgentSession): Promise<void> {
    const ids = [...session.unconfirmed].filter((id) => session.jobs.has(id));
    session.unconfirmed.clear();
    const agentId = session.agent.id;
    const states = await this.o.transfers.states(ids);
    for (const id of ids) {
      const attempt = session.jobs.get(id)!;
      session.jobs.delete(id);
      if (!states.get(id)?.accepted_at) {
        await this.o.transfers.unassign(id, agentId, attempt);
        continue;
      }
      await this.o.transfers.interrupt(id, attempt, `Agent ${session.agent.name} restarted and lost the run`, { agent_id: new Types.ObjectId(agentId) });
    }
    await this.o.events.emit('ready', session);
  }

  /** A run of the session ended, so a slot may be free: the next waiting transfer need not wait for the loop's next turn. */
  private async slotFreed(session: AgentSession): Promise<void> {
    await this.o.events.emit('ready', session);
  }

  /** Applies a job report of the agent, in the order the agent sent them. */
  async report(session: AgentSession, report: JobReport): Promise<void> {
    const agentId = session.agent.id;
    const id = report.payload.job_id;
    const ongoing = report.type === 'job.accepted' || report.type === 'job.progress';
    const seq = 'seq' in report.payload ? report.payload.seq : undefined;
    if (session.stopping.has(id)) {
      // Late reports of a run told to stop change nothing; its end clears the way for a new run.
      if (!ongoing) session.stopping.delete(id);
      this.ack(session, [seq]);
      return;
    }
    const attempt = session.jobs.get(id);
    if (attempt === undefined) {
      // A run this session was never given (or a report sent again after it was applied): make sure it stops.
      if (ongoing) this.stop(session, id);
      this.ack(session, [seq]);
      return;
    }
    const jobs = this.o.transfers;
    if (report.type === 'job.progress') return this.queueProgress(session, id, attempt, report.payload);
    // Every report after progress applies after it.
    await this.progressWritten(session, id);
    let applied: boolean;
    switch (report.type) {
      case 'job.accepted':
        applied = await jobs.accepted(id, agentId, attempt);
        break;
      case 'job.completed':
        session.jobs.delete(id);
        await withRetries(() => jobs.completed(id, agentId, attempt, report.payload));
        this.ack(session, [seq]);
        await this.slotFreed(session);
        return;
      case 'job.failed':
        session.jobs.delete(id);
        // A run stopped for a reason that is not the job's (the agent shutting down, a relay that
        // lost a side) is taken over and resumed elsewhere instead of failing the transfer.
        if (report.payload.interrupted) {
          const reason = `Agent ${session.agent.name} interrupted the run: ${report.payload.error}`;
          await withRetries(() => jobs.interrupt(id, attempt, reason, { agent_id: new Types.ObjectId(agentId) }));
        } else {
          await withRetries(() => jobs.failed(id, agentId, attempt, report.payload));
        }
        this.ack(session, [seq]);
        await this.slotFreed(session);
        return;
      case 'job.cancelled':
        // Normally the answer to our job.cancel (the job is cancelled already and nothing changes);
        // an agent that stops a run by itself leaves a job nobody runs: it fails.
        session.jobs.delete(id);
        await withRetries(() => jobs.fail(id, attempt, `Agent ${session.agent.name} stopped the job before it finished`, { agent_id: new Types.ObjectId(agentId) }));
        this.ack(session, [seq]);
        await this.slotFreed(session);
        return;
    }
    if (!applied) this.stop(session, id);
  }

  /**
   * Run by the dispatcher loop: stops runs the database no longer wants (cancelled, taken over,
   * failed, deleted, retried; on any instance) and settles resyncs that got no pong.
   */
  async reconcile(sessions: AgentSession[]): Promise<void> {
    const now = Date.now();
    for (const s of sessions) {
      if (s.unconfirmed.size > 0 && now > s.resyncDeadline) await this.settle(s);
      for (const [id, since] of s.stopping) if (now - since > Math.max(STOP_ACK_MS, 3 * this.o.heartbeatMs)) s.stopping.delete(id);
    }
    const busy = sessions.filter((s) => s.jobs.size > 0);
    if (busy.length === 0) return;
    const states = await this.o.transfers.states(busy.flatMap((s) => [...s.jobs.keys()]));
    for (const s of busy) {
      for (const [id, attempt] of s.jobs) {
        const state = states.get(id);
        if (state?.status === 'in-progress' && String(state.agent_id) === s.agent.id && state.attempt === attempt) continue;
        this.stop(s, id);
      }
    }
  }

  /** Tells the agent to stop its run of a job; see AgentSession.stopping. */
  stop(session: AgentSession, id: string): void {
    session.jobs.delete(id);
    session.unconfirmed.delete(id);
    session.markStopping(id);
    session.send('job.cancel', { job_id: id });
  }
}

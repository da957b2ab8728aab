import { Types } from 'mongoose';
import type { FastifyBaseLogger } from 'fastify';
import type { ScheduleRun, ScheduleRunStatus, ScheduleRunTrigger, TransferOptionsInput, TransferStatus } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { ScheduleDoc } from '../../../models/schedule.model.js';
import type { ScheduleRunDoc } from '../../../models/schedule-run.model.js';
import type { StoredTransfer, TransfersService } from '../transfers/index.js';
import type { StoredWorkflowRun, WorkflowRuns } from '../workflows/index.js';
import { AppError } from '../../../errors.js';
import { ownerAuthorityProblem } from '../access/index.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';

export type StoredSchedule = ScheduleDoc & { _id: Types.ObjectId };
export type StoredScheduleRun = ScheduleRunDoc & { _id: Types.ObjectId };

/**
 * A run still `starting` this long after it was claimed was left by an instance that stopped
 * between the claim and the transfer's creation: it is shown `failed` (reads write nothing).
 */
export const STALE_START_MS = 5 * 60_000;

/** What the runs need: the database, and the services a run creates and queues its transfer through. */
export interface ScheduleRunsOptions {
  db: Models;
  transfers: Pick<TransfersService, 'create' | 'enqueue'>;
  /** Starts the run of a schedule's workflow (plugins/app/workflows/). */
  workflowRuns: Pick<WorkflowRuns, 'startOf'>;
  /** Tells this instance's dispatcher that a transfer waits (the others find it on their own). */
  wakeDispatcher: () => void;
  log: Pick<FastifyBaseLogger, 'error'>;
}

type RunOutcome = Pick<StoredScheduleRun, 'state' | 'error'> & { job?: StoredTransfer; workflowRun?: StoredWorkflowRun; denied?: boolean };
/** A run as started: `denied` when its owner's authority was lost (not stored; the audit record says it). */
export type StartedScheduleRun = StoredScheduleRun & { denied: boolean };

/**
 * The status a run shows: its transfer's (or its workflow run's, `running` shown as
 * `in-progress`) while it has one, else what became of it.
 */
export function runStatus(
  run: Pick<StoredScheduleRun, 'state' | 'error' | 'started_at' | 'transfer_id' | 'workflow_run_id'>,
  transfer: { status: TransferStatus; error?: string | null } | null, now = new Date(),
): { status: ScheduleRunStatus; error: string | null } {
  switch (run.state) {
    case 'skipped':
      return { status: 'skipped', error: run.error ?? null };
    case 'failed':
      return { status: 'failed', error: run.error ?? null };
    case 'starting':
      return now.getTime() - run.started_at.getTime() > STALE_START_MS
        ? { status: 'failed', error: 'the control-plane instance that started this run stopped before it created its transfer' }
        : { status: 'queued', error: null };
    default:
      if (!transfer) {
        return { status: 'unknown', error: run.workflow_run_id ? `its workflow run ${String(run.workflow_run_id)} was deleted` : `its transfer ${String(run.transfer_id)} was deleted` };
      }
      return { status: transfer.status, error: transfer.status === 'failed' ? transfer.error ?? null : null };
  }
}

/** The read shape of a run, given its transfer (null: none, or deleted). */
export function presentRun(run: StoredScheduleRun, transfer: { status: TransferStatus; error?: string | null } | null): ScheduleRun {
  return {
    id: String(run._id),
    schedule_id: String(run.schedule_id),
    trigger: run.trigger as ScheduleRunTrigger,
    scheduled_for: run.scheduled_for.toISOString(),
    started_at: run.started_at.toISOString(),
    transfer_id: run.transfer_id ? String(run.transfer_id) : null,
    workflow_run_id: run.workflow_run_id ? String(run.workflow_run_id) : null,
    ...runStatus(run, transfer),
  };
}

/**
 * The runs of schedules: claimed by inserting them (the unique `{schedule_id, scheduled_for}`
 * index makes each due time one run across every instance), then started: skipped under
 * `overlap: skip` while the previous run's transfer has not ended (an exact claim too: the
 * schedule's in-flight document), else a workflow run is started (a schedule of a workflow) or a transfer is created
 * through the same service `POST /transfers` uses, its path templates rendered for this run, and
 * queued for an agent without waiting for it.
 */
export class ScheduleRuns {
  constructor(private readonly o: ScheduleRunsOptions) {}

  /** Inserts the run of `scheduledFor`: null when that due time has a run already (another instance claimed it). */
  async claim(schedule: StoredSchedule, scheduledFor: Date, trigger: ScheduleRunTrigger): Promise<StoredScheduleRun | null> {
    const run = {
      _id: new Types.ObjectId(), schedule_id: schedule._id, account_id: schedule.account_id, trigger, scheduled_for: scheduledFor,
      started_at: new Date(), transfer_id: null, workflow_run_id: null, state: 'starting', error: null,
    };
    try {
      await this.o.db.scheduleRuns.collection.insertOne(run);
      return run as StoredScheduleRun;
    } catch (err) {
      if (isDuplicateKey(err)) return null;
      throw err;
    }
  }

  /**
   * A manual run (`POST /schedules/:id/run`), due now. A due time of the same millisecond taken
   * already (the loop's, at a full minute) moves it on by a millisecond.
   */
  async claimNow(schedule: StoredSchedule): Promise<StoredScheduleRun> {
    const now = Date.now();
    for (let ms = 0; ; ms++) {
      const run = await this.claim(schedule, new Date(now + ms), 'manual');
      if (run) return run;
    }
  }

  /** Starts a claimed run and records how it went on the run and on its schedule. */
  async start(schedule: StoredSchedule, run: StoredScheduleRun): Promise<StartedScheduleRun> {
    const outcome = await this.outcomeOf(schedule, run);
    const { db } = this.o;
    const set = { state: outcome.state, error: outcome.error ?? null, transfer_id: outcome.job?._id ?? null, workflow_run_id: outcome.workflowRun?._id ?? null };
    await db.scheduleRuns.updateOne({ _id: run._id }, { $set: set });
    // Only a newer run than the one recorded moves `last_*` (a manual run and a due one may cross).
    await db.schedules.updateOne(
      { _id: schedule._id, $or: [{ last_run_at: null }, { last_run_at: { $lte: run.started_at } }] },
      {
        $set: {
          last_run_id: run._id, last_run_at: run.started_at, last_run_state: outcome.state,
          last_transfer_id: outcome.job?._id ?? null, last_workflow_run_id: outcome.workflowRun?._id ?? null,
        },
      },
    );
    // Queued for an agent without waiting for it; the run's status follows the transfer's.
    if (outcome.job && await this.o.transfers.enqueue(outcome.job)) this.o.wakeDispatcher();
    return { ...run, ...set, denied: outcome.denied ?? false };
  }

  private async outcomeOf(schedule: StoredSchedule, run: StoredScheduleRun): Promise<RunOutcome> {
    // It runs with its owner's authority, checked now: a key revoked, expired or narrowed since
    // it saved the schedule runs nothing through it (docs/security.md "Escalation rules").
    const refused = await ownerAuthorityProblem(
      this.o.db, schedule.account_id, schedule.owner, { runsWorkflow: Boolean(schedule.workflow_id) }, `PUT /schedules/${String(schedule._id)}`,
    );
    if (refused) return { state: 'failed', error: `The schedule did not run: ${refused}`, denied: true };
    const exclusive = schedule.overlap === 'skip';
    let holding = false;
    try {
      if (exclusive) {
        const busy = await this.claimInflight(schedule._id, run._id);
        if (busy) return { state: 'skipped', error: `${busy} (overlap: skip)` };
        holding = true;
      }
      if (schedule.workflow_id) {
        // The workflow run's id is the schedule run's: a run started twice (after a crash) starts one workflow run.
        const workflowRun = await this.o.workflowRuns.startOf(schedule.account_id, schedule.workflow_id, {
          id: run._id, trigger: { type: 'schedule', id: schedule._id }, now: run.scheduled_for, timezone: schedule.timezone,
        });
        if (exclusive) await this.o.db.scheduleInflight.updateOne({ _id: schedule._id, run_id: run._id }, { $set: { workflow_run_id: workflowRun._id } });
        holding = false;
        return { state: 'started', error: null, workflowRun };
      }
      const job = await this.createTransfer(schedule, run);
      if (exclusive) await this.o.db.scheduleInflight.updateOne({ _id: schedule._id, run_id: run._id }, { $set: { transfer_id: job._id } });
      holding = false;
      return { state: 'started', error: null, job };
    } catch (err) {
      if (holding) await this.o.db.scheduleInflight.deleteOne({ _id: schedule._id, run_id: run._id }).catch(() => {});
      // A 4xx is the run's own problem (a connection deleted, a parameter gone or made secret):
      // the run fails saying so. Anything else is the server's: logged, not shown.
      if (err instanceof AppError && err.statusCode < 500) return { state: 'failed', error: err.message };
      this.o.log.error({ err, schedule_id: String(schedule._id), run_id: String(run._id) }, 'schedule run could not be started');
      return { state: 'failed', error: 'the run could not be started (an internal error, logged by the server)' };
    }
  }

  /**
   * Claims the schedule's one run in flight (models/schedule-inflight.model.ts) for `runId`: null
   * when claimed, else why not. A claim whose transfer has ended (or was deleted), or whose run
   * died before making one, is freed first, by exactly one of the runs that find it so.
   */
  private async claimInflight(scheduleId: Types.ObjectId, runId: Types.ObjectId): Promise<string | null> {
    const { db } = this.o;
    for (let tries = 0; tries < 3; tries++) {
      try {
        await db.scheduleInflight.collection.insertOne({ _id: scheduleId, run_id: runId, transfer_id: null, since: new Date() });
        return null;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      const held = await db.scheduleInflight.findById(scheduleId).lean();
      if (!held) continue;
      const busy = await this.stillBusy(held);
      if (busy) return busy;
      await db.scheduleInflight.deleteOne({ _id: scheduleId, run_id: held.run_id });
    }
    return 'another run of this schedule started at the same moment';
  }

  /** Why the run holding the claim still counts as running, or null when it no longer does. */
  private async stillBusy(held: { run_id: Types.ObjectId; transfer_id?: Types.ObjectId | null; workflow_run_id?: Types.ObjectId | null; since: Date }): Promise<string | null> {
    if (held.workflow_run_id) {
      const wr = await this.o.db.workflowRuns.findById(held.workflow_run_id, { status: 1 }).lean();
      return wr && (wr.status === 'queued' || wr.status === 'running') ? `the workflow run ${String(wr._id)} of the previous run had not ended` : null;
    }
    if (!held.transfer_id) {
      return Date.now() - held.since.getTime() < STALE_START_MS ? `the previous run ${String(held.run_id)} is still starting` : null;
    }
    const job = await this.o.db.transfers.findById(held.transfer_id, { status: 1 }).lean();
    return job && (job.status === 'queued' || job.status === 'in-progress') ? `the transfer ${String(job._id)} of the previous run had not ended` : null;
  }

  /**
   * The run's transfer, through the service `POST /transfers` uses: its path templates rendered
   * there with the account's parameters, `{{date}}` at the due time in the schedule's zone and
   * `{{run.id}}` the run's id. A 400 (a parameter deleted or made secret since the schedule was
   * stored) or 404 (a connection deleted) fails the run, naming the field.
   */
  private createTransfer(schedule: StoredSchedule, run: StoredScheduleRun): Promise<StoredTransfer> {
    const t = schedule.transfer!;
    return this.o.transfers.create(schedule.account_id, {
      name: schedule.name,
      sourceConnectionId: String(t.source_connection_id),
      sourcePath: t.source_path,
      destinationConnectionId: String(t.destination_connection_id),
      destinationPath: t.destination_path,
      options: t.options as TransferOptionsInput,
    }, { now: run.scheduled_for, timezone: schedule.timezone, runId: String(run._id), fieldPrefix: 'transfer.' });
  }
}

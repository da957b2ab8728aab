import { Types } from 'mongoose';
import type { FastifyBaseLogger } from 'fastify';
import type { ScheduleRun, ScheduleRunStatus, ScheduleRunTrigger, TransferOptionsInput, TransferStatus } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { ScheduleDoc } from '../../../models/schedule.model.js';
import type { ScheduleRunDoc } from '../../../models/schedule-run.model.js';
import type { StoredTransfer, TransfersService } from '../transfers/index.js';
import { AppError } from '../../../errors.js';
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
  /** Tells this instance's dispatcher that a transfer waits (the others find it on their own). */
  wakeDispatcher: () => void;
  log: Pick<FastifyBaseLogger, 'error'>;
}

type RunOutcome = Pick<StoredScheduleRun, 'state' | 'error'> & { job?: StoredTransfer };

/** The status a run shows: its transfer's while it has one, else what became of it. */
export function runStatus(
  run: Pick<StoredScheduleRun, 'state' | 'error' | 'started_at' | 'transfer_id'>, transfer: { status: TransferStatus; error?: string | null } | null, now = new Date(),
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
      if (!transfer) return { status: 'unknown', error: `its transfer ${String(run.transfer_id)} was deleted` };
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
 * `overlap: skip` while the previous run's transfer has not ended, else a transfer is created
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
  async start(schedule: StoredSchedule, run: StoredScheduleRun): Promise<StoredScheduleRun> {
    const outcome = await this.outcomeOf(schedule, run);
    const { db } = this.o;
    const set = { state: outcome.state, error: outcome.error ?? null, transfer_id: outcome.job?._id ?? null };
    await db.scheduleRuns.updateOne({ _id: run._id }, { $set: set });
    // Only a newer run than the one recorded moves `last_*` (a manual run and a due one may cross).
    await db.schedules.updateOne(
      { _id: schedule._id, $or: [{ last_run_at: null }, { last_run_at: { $lte: run.started_at } }] },
      {
        $set: {
          last_run_id: run._id, last_run_at: run.started_at, last_run_state: outcome.state,
          ...(outcome.job ? { last_transfer_id: outcome.job._id } : {}),
        },
      },
    );
    // Queued for an agent without waiting for it; the run's status follows the transfer's.
    if (outcome.job && await this.o.transfers.enqueue(outcome.job)) this.o.wakeDispatcher();
    return { ...run, ...set };
  }

  private async outcomeOf(schedule: StoredSchedule, run: StoredScheduleRun): Promise<RunOutcome> {
    try {
      if (!schedule.transfer) return { state: 'failed', error: 'workflows are not available yet' };
      if (schedule.overlap === 'skip') {
        const busy = await this.unfinishedTransferOf(schedule._id);
        if (busy) return { state: 'skipped', error: `the transfer ${String(busy)} of the previous run had not ended (overlap: skip)` };
      }
      const job = await this.createTransfer(schedule, run);
      return { state: 'started', error: null, job };
    } catch (err) {
      // A 4xx is the run's own problem (a connection deleted, a parameter gone or made secret):
      // the run fails saying so. Anything else is the server's: logged, not shown.
      if (err instanceof AppError && err.statusCode < 500) return { state: 'failed', error: err.message };
      this.o.log.error({ err, schedule_id: String(schedule._id), run_id: String(run._id) }, 'schedule run could not be started');
      return { state: 'failed', error: 'the run could not be started (an internal error, logged by the server)' };
    }
  }

  /** The newest transfer of the schedule's runs, when it is still queued or in progress. */
  private async unfinishedTransferOf(scheduleId: Types.ObjectId): Promise<Types.ObjectId | null> {
    const { db } = this.o;
    const fresh = await db.schedules.findById(scheduleId, { last_transfer_id: 1 }).lean();
    if (!fresh?.last_transfer_id) return null;
    const job = await db.transfers.findById(fresh.last_transfer_id, { status: 1 }).lean();
    return job && (job.status === 'queued' || job.status === 'in-progress') ? job._id : null;
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

import type { FastifyBaseLogger } from 'fastify';
import type { Models } from '../../../models/index.js';
import type { AuditService } from '../access/audit.service.js';
import { Loop } from '../../../lib/loop.js';
import { latestDueAtOrBefore, nextDueAfter } from './cron.js';
import { runStatus, type ScheduleRuns, type StartedScheduleRun, type StoredSchedule } from './schedule-runs.js';

/** How many due schedules one pass takes; the rest wait for the next pass (a second later). */
const BATCH = 100;
/** Due schedules one instance fires at once. */
const CONCURRENCY = 4;

/** Fisher-Yates, in place. */
function shuffle<T>(items: T[]): void {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
}

/** What the firing loop needs. */
export interface ScheduleFiringOptions {
  db: Models;
  runs: ScheduleRuns;
  audit: Pick<AuditService, 'record'>;
  log: Pick<FastifyBaseLogger, 'warn'>;
  /** How often each instance looks for due schedules: a due time fires within about this much of it. */
  tickMs: number;
}

/**
 * The firing loop of schedules, one on every control-plane instance (docs/architecture.md
 * "Schedules"). Every `tickMs` it reads the active schedules whose `next_run_at` has come, and
 * for each claims the newest due time at or before now by inserting its run (the unique
 * `{schedule_id, scheduled_for}` index: exactly one instance wins, on FerretDB too), moves
 * `next_run_at` past now (a conditional update: several instances may write the same value; the
 * claim, not this update, is what makes a due time run once), then starts the run it won.
 *
 * After downtime `next_run_at` lies in the past: the newest missed due time runs once (the
 * catch-up run) and the older ones never do, so a control plane down for a day does not start a
 * burst of a day's runs when it comes back.
 */
export class ScheduleFiring {
  private readonly loop: Loop;

  constructor(private readonly o: ScheduleFiringOptions) {
    this.loop = new Loop(() => this.tick(), o.tickMs, (err) => o.log.warn({ err }, 'schedules: a firing pass failed; retrying on the next pass'));
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One pass: fires every due schedule (exported for tests that drive time themselves). */
  async tick(now = new Date()): Promise<void> {
    const due = await this.o.db.schedules.find({ active: true, next_run_at: { $ne: null, $lte: now } })
      .sort({ next_run_at: 1 }).limit(BATCH).lean<StoredSchedule[]>();
    // In an order of this instance's own, a few at once: instances that find the same due
    // schedules then mostly claim different ones, and share the work instead of racing for it.
    shuffle(due);
    const next = () => due.pop();
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      for (let schedule = next(); schedule; schedule = next()) {
        try {
          await this.fire(schedule, now);
        } catch (err) {
          this.o.log.warn({ err, schedule_id: String(schedule._id) }, 'schedules: a due schedule could not be fired; retrying on the next pass unless its due time was claimed');
        }
      }
    }));
  }

  private async fire(schedule: StoredSchedule, now: Date): Promise<void> {
    const { db } = this.o;
    const { cron, timezone } = schedule;
    const dueAt = latestDueAtOrBefore(cron, timezone, now) ?? schedule.next_run_at!;
    const run = await this.o.runs.claim(schedule, dueAt, 'schedule');
    await db.schedules.updateOne(
      { _id: schedule._id, next_run_at: schedule.next_run_at },
      { $set: { next_run_at: nextDueAfter(cron, timezone, now) } },
    );
    if (!run) return;
    await this.audited(schedule, await this.o.runs.start(schedule, run));
  }

  /**
   * The audit record of a run the loop started: by the system, naming the schedule, the run and
   * its transfer; `denied` when the schedule's owner no longer had the authority to run it.
   */
  private async audited(schedule: StoredSchedule, run: StartedScheduleRun): Promise<void> {
    const { status, error } = runStatus(run, run.transfer_id ? { status: 'queued' } : null);
    await this.o.audit.record({
      accountId: schedule.account_id,
      actor: { type: 'system', id: null },
      action: 'schedule.fire',
      resource: { type: 'schedule', id: String(schedule._id) },
      outcome: run.denied ? 'denied' : status === 'failed' ? 'failure' : 'success',
      details: {
        name: schedule.name, run_id: String(run._id), scheduled_for: run.scheduled_for.toISOString(),
        transfer_id: run.transfer_id ? String(run.transfer_id) : null, status, ...(error ? { error } : {}), ...(run.denied ? { reason: 'owner authority' } : {}),
      },
    });
  }
}

import { Types } from 'mongoose';
import {
  basePathProblem,
  type CreateScheduleRequest, type ListScheduleRunsQuery, type ListSchedulesQuery, type Page, type Schedule, type ScheduleRun,
  type ScheduleTransferInput, type UpdateScheduleRequest,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { ParametersService } from '../parameters/index.js';
import { presentedOptions, storedOptions, type TransferOutcome, type TransfersService } from '../transfers/index.js';
import type { WorkflowRuns, WorkflowsService } from '../workflows/index.js';
import { ownedConnectionId } from '../connections/index.js';
import { presentOwner, type StoredOwner } from '../access/index.js';
import { BadRequestError, NotFoundError } from '../../../errors.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import { checkCron, checkTimeZone, nextDueAfter } from './cron.js';
import { presentRun, runStatus, type ScheduleRuns, type StoredSchedule, type StoredScheduleRun } from './schedule-runs.js';

type AccountId = string | Types.ObjectId;

/** Called with what the audit record names after the checks, right before the write (audit.service.ts `change`). */
export type BeforeWrite = (id: string, details: Record<string, unknown>) => Promise<void>;
const noAnnouncement: BeforeWrite = async () => {};

/** What the schedules service needs. */
export interface SchedulesServiceOptions {
  db: Models;
  transfers: Pick<TransfersService, 'outcomes'>;
  parameters: Pick<ParametersService, 'checkTemplate'>;
  /** Checks a `workflowId`. */
  workflows: Pick<WorkflowsService, 'checkReference'>;
  /** What the workflow runs of runs became. */
  workflowRuns: Pick<WorkflowRuns, 'outcomes'>;
  runs: ScheduleRuns;
}

const scheduleNotFound = (id: string) => new NotFoundError(`Schedule ${id} not found`);

/** The read shape of a schedule; `last` is the transfer (or workflow run) of its last run, when that run made one. */
export function presentSchedule(doc: StoredSchedule, last: TransferOutcome | null): Schedule {
  const t = doc.transfer;
  const lastRun = doc.last_run_id && doc.last_run_at && doc.last_run_state
    ? runStatus({
      state: doc.last_run_state as StoredScheduleRun['state'], error: null, started_at: doc.last_run_at,
      transfer_id: doc.last_transfer_id, workflow_run_id: doc.last_workflow_run_id,
    }, last)
    : null;
  return {
    id: String(doc._id),
    name: doc.name,
    cron: doc.cron,
    timezone: doc.timezone,
    active: doc.active,
    overlap: doc.overlap as Schedule['overlap'],
    transfer: t
      ? {
        sourceConnectionId: String(t.source_connection_id), sourcePath: t.source_path,
        destinationConnectionId: String(t.destination_connection_id), destinationPath: t.destination_path, options: presentedOptions(t.options),
      }
      : null,
    workflowId: doc.workflow_id ? String(doc.workflow_id) : null,
    owner: presentOwner(doc.owner),
    next_run_at: doc.next_run_at ? doc.next_run_at.toISOString() : null,
    last_run_at: doc.last_run_at ? doc.last_run_at.toISOString() : null,
    last_status: lastRun?.status ?? null,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
  };
}

/** What an audit record says about a schedule: its timing and its transfer's connections and paths or its workflow (never a parameter's value). */
function auditDetails(doc: Pick<StoredSchedule, 'name' | 'cron' | 'timezone' | 'active' | 'overlap' | 'transfer' | 'workflow_id'>): Record<string, unknown> {
  const t = doc.transfer;
  return {
    name: doc.name, cron: doc.cron, timezone: doc.timezone, active: doc.active, overlap: doc.overlap,
    ...(doc.workflow_id ? { workflow_id: String(doc.workflow_id) } : {}),
    ...(t ? {
      source_connection_id: String(t.source_connection_id), source_path: t.source_path,
      destination_connection_id: String(t.destination_connection_id), destination_path: t.destination_path,
    } : {}),
  };
}

/**
 * An account's schedules and their runs (`app.schedules`; docs/automation.md "Schedules"). Every
 * query is scoped to the account: an unknown id, a malformed one and another account's are the
 * same 404. Firing is plugins/app/schedules/firing.ts; running is schedule-runs.ts.
 */
export class SchedulesService {
  constructor(private readonly o: SchedulesServiceOptions) {}

  /** A page of the account's schedules, newest first. */
  async list(accountId: AccountId, query: ListSchedulesQuery): Promise<Page<Schedule>> {
    const page = await paginate(this.o.db.schedules, { account_id: accountId }, query, (doc) => doc as StoredSchedule);
    const lasts = await this.outcomes(page.data.map((d) => ({ transfer_id: d.last_transfer_id, workflow_run_id: d.last_workflow_run_id })));
    return { data: page.data.map((d) => presentSchedule(d, lasts.get(String(d.last_workflow_run_id ?? d.last_transfer_id)) ?? null)), next_cursor: page.next_cursor };
  }

  /** The caller's schedule, or 404. */
  async get(accountId: AccountId, id: string): Promise<Schedule> {
    return this.present(await this.find(accountId, id));
  }

  /** The stored schedule of the caller, or 404 for unknown, malformed and other accounts' ids alike. */
  async find(accountId: AccountId, id: string): Promise<StoredSchedule> {
    const _id = toObjectId(id);
    // By _id alone (FerretDB pushes only that down), the account checked here.
    const doc = _id && await this.o.db.schedules.findById(_id).lean<StoredSchedule>();
    if (!doc || String(doc.account_id) !== String(accountId)) throw scheduleNotFound(id);
    return doc;
  }

  /**
   * Creates a schedule after every check (400 naming the field); its first due time is the first
   * after now. `owner` is the caller, whose authority it runs with (schedule-runs.ts checks it on each run).
   */
  async create(accountId: AccountId, owner: StoredOwner, input: CreateScheduleRequest, beforeWrite: BeforeWrite = noAnnouncement): Promise<Schedule> {
    const target = await this.checkedTarget(accountId, input.transfer, input.workflowId, true);
    checkCron(input.cron);
    const timezone = input.timezone ?? 'UTC';
    checkTimeZone(timezone);
    const active = input.active ?? true;
    const now = new Date();
    const doc = {
      _id: new Types.ObjectId(), account_id: new Types.ObjectId(String(accountId)), name: input.name.trim(), cron: input.cron.trim(), timezone, active,
      overlap: input.overlap ?? 'skip', transfer: target!.transfer, workflow_id: target!.workflow_id, owner,
      next_run_at: active ? nextDueAfter(input.cron, timezone, now) : null,
      last_run_id: null, last_run_at: null, last_run_state: null, last_transfer_id: null, last_workflow_run_id: null, created_at: now, updated_at: now,
    };
    await beforeWrite(String(doc._id), auditDetails(doc));
    await this.o.db.schedules.collection.insertOne(doc);
    return presentSchedule(doc as StoredSchedule, null);
  }

  /**
   * Changes the fields given. A change of `cron`, `timezone` or `active` sets `next_run_at` to the
   * first due time after now: times missed while a schedule was paused are not caught up. Whoever
   * saves it becomes its `owner` (the route checked it holds what the schedule needs).
   */
  async update(
    accountId: AccountId, owner: StoredOwner, id: string, input: UpdateScheduleRequest, beforeWrite: BeforeWrite = noAnnouncement,
  ): Promise<{ schedule: Schedule; changed: string[] }> {
    const changed = Object.keys(input).sort();
    if (changed.length === 0) throw new BadRequestError('body must contain at least one of name, cron, timezone, active, overlap, transfer, workflowId');
    const current = await this.find(accountId, id);
    const target = await this.checkedTarget(accountId, input.transfer, input.workflowId, false);
    if (input.cron !== undefined) checkCron(input.cron);
    if (input.timezone !== undefined) checkTimeZone(input.timezone);
    const next = {
      name: input.name?.trim() ?? current.name,
      cron: input.cron?.trim() ?? current.cron,
      timezone: input.timezone ?? current.timezone,
      active: input.active ?? current.active,
      overlap: input.overlap ?? current.overlap,
      transfer: target ? target.transfer : current.transfer,
      workflow_id: target ? target.workflow_id : current.workflow_id,
    };
    const retime = input.cron !== undefined || input.timezone !== undefined || input.active !== undefined;
    const set: Record<string, unknown> = { ...next, owner, updated_at: new Date() };
    if (retime) set.next_run_at = next.active ? nextDueAfter(next.cron, next.timezone, new Date()) : null;
    await beforeWrite(id, { ...auditDetails(next), changed });
    const updated = await this.o.db.schedules.findOneAndUpdate({ _id: current._id, account_id: current.account_id }, { $set: set }, { new: true })
      .lean<StoredSchedule>();
    if (!updated) throw scheduleNotFound(id);
    return { schedule: await this.present(updated), changed };
  }

  /** Deletes a schedule and its run history (the transfers its runs made stay). */
  async delete(accountId: AccountId, id: string, beforeWrite: BeforeWrite = noAnnouncement): Promise<Schedule> {
    const doc = await this.find(accountId, id);
    await beforeWrite(String(doc._id), auditDetails(doc));
    if ((await this.o.db.schedules.deleteOne({ _id: doc._id, account_id: doc.account_id })).deletedCount !== 1) throw scheduleNotFound(id);
    await this.o.db.scheduleRuns.deleteMany({ schedule_id: doc._id });
    await this.o.db.scheduleInflight.deleteOne({ _id: doc._id });
    return presentSchedule(doc, null);
  }

  /**
   * Runs the schedule now (whether active or not), `overlap` applying as to a due time; the run as
   * it started, and whether it was refused for its owner's lost authority (schedule-runs.ts).
   */
  async runNow(accountId: AccountId, id: string): Promise<{ run: ScheduleRun; denied: boolean }> {
    const schedule = await this.find(accountId, id);
    const run = await this.o.runs.start(schedule, await this.o.runs.claimNow(schedule));
    return { run: presentRun(run, (await this.outcomes([run])).get(String(run.workflow_run_id ?? run.transfer_id)) ?? null), denied: run.denied };
  }

  /** A page of the schedule's runs, newest first, each with its transfer's status as it is now. */
  async listRuns(accountId: AccountId, id: string, query: ListScheduleRunsQuery): Promise<Page<ScheduleRun>> {
    const schedule = await this.find(accountId, id);
    const page = await paginate(this.o.db.scheduleRuns, { schedule_id: schedule._id }, query, (doc) => doc as StoredScheduleRun);
    const outcomes = await this.outcomes(page.data);
    return { data: page.data.map((r) => presentRun(r, outcomes.get(String(r.workflow_run_id ?? r.transfer_id)) ?? null)), next_cursor: page.next_cursor };
  }

  private async present(doc: StoredSchedule): Promise<Schedule> {
    const last = await this.outcomes([{ transfer_id: doc.last_transfer_id, workflow_run_id: doc.last_workflow_run_id }]);
    return presentSchedule(doc, last.get(String(doc.last_workflow_run_id ?? doc.last_transfer_id)) ?? null);
  }

  /** What the transfers and workflow runs of these runs became, by id (one `_id` read each). */
  private async outcomes(runs: Array<{ transfer_id?: Types.ObjectId | null; workflow_run_id?: Types.ObjectId | null }>): Promise<Map<string, TransferOutcome>> {
    const [transfers, workflowRuns] = await Promise.all([
      this.o.transfers.outcomes(runs.map((r) => (r.workflow_run_id ? null : r.transfer_id))),
      this.o.workflowRuns.outcomes(runs.map((r) => r.workflow_run_id)),
    ]);
    return new Map([...transfers, ...workflowRuns]);
  }

  /**
   * The target of a create or update, checked: exactly one of `transfer` and `workflowId` on a
   * create (at most one on an update); a workflow of the account, or a transfer over connections
   * of the account whose paths are valid templates of existing, non-secret parameters.
   */
  private async checkedTarget(accountId: AccountId, transfer: ScheduleTransferInput | undefined, workflowId: string | undefined, create: boolean) {
    if (transfer !== undefined && workflowId !== undefined) throw new BadRequestError('body must have exactly one of transfer and workflowId, not both');
    if (workflowId !== undefined) return { transfer: null, workflow_id: await this.o.workflows.checkReference(accountId, 'workflowId', workflowId) };
    if (transfer === undefined) {
      if (create) throw new BadRequestError('body must have exactly one of transfer and workflowId');
      return null;
    }
    await ownedConnectionId(this.o.db, accountId, 'transfer.sourceConnectionId', transfer.sourceConnectionId);
    await ownedConnectionId(this.o.db, accountId, 'transfer.destinationConnectionId', transfer.destinationConnectionId);
    for (const field of ['sourcePath', 'destinationPath'] as const) {
      const problem = basePathProblem(transfer[field]);
      if (problem) throw new BadRequestError(`transfer.${field} ${problem.replace(/^path /, '')}`);
      await this.o.parameters.checkTemplate(accountId, `transfer.${field}`, transfer[field], { run: true });
    }
    return {
      transfer: {
        source_connection_id: new Types.ObjectId(transfer.sourceConnectionId), source_path: transfer.sourcePath,
        destination_connection_id: new Types.ObjectId(transfer.destinationConnectionId), destination_path: transfer.destinationPath,
        options: storedOptions(transfer.options, 'transfer.options'),
      },
      workflow_id: null,
    };
  }
}

import { Type, type Static } from '@sinclair/typebox';
import { AutomationOwner, Id, Name, PageQuery, StringEnum, Timestamp } from './common.js';
import { JobOptions } from '../protocol/agent-protocol.js';
import { MAX_TRANSFER_PATH_LENGTH, TransferOptionsInput } from './transfers.js';

/** What a due time does while the previous run's transfer has not ended (scope-areas.md "Schedules"). */
export const SCHEDULE_OVERLAPS = ['skip', 'queue'] as const;
export type ScheduleOverlap = (typeof SCHEDULE_OVERLAPS)[number];

/**
 * Where a schedule run stands: the status of its transfer; `skipped` (overlap `skip` while the
 * previous run's transfer had not ended); `failed` also when no transfer could be created (the
 * reason in `error`); `unknown` once its transfer has been deleted.
 */
export const SCHEDULE_RUN_STATUSES = ['queued', 'in-progress', 'completed', 'failed', 'cancelled', 'skipped', 'unknown'] as const;
export type ScheduleRunStatus = (typeof SCHEDULE_RUN_STATUSES)[number];

/** How a run came about: a due time of the cron expression, or `POST /schedules/:id/run`. */
export const SCHEDULE_RUN_TRIGGERS = ['schedule', 'manual'] as const;
export type ScheduleRunTrigger = (typeof SCHEDULE_RUN_TRIGGERS)[number];

/** The transfer a schedule creates on each run; the paths are templates rendered per run. */
export const ScheduleTransfer = Type.Object({
  sourceConnectionId: Id,
  sourcePath: Type.String(),
  destinationConnectionId: Id,
  destinationPath: Type.String(),
  options: JobOptions,
});
export type ScheduleTransfer = Static<typeof ScheduleTransfer>;

/** A schedule as every read shows it (scope-areas.md "Schedules"). */
export const Schedule = Type.Object({
  id: Id,
  name: Type.String(),
  /** Five fields: minute hour day-of-month month day-of-week. */
  cron: Type.String(),
  /** IANA time zone the cron expression is read in. */
  timezone: Type.String(),
  active: Type.Boolean(),
  overlap: StringEnum(SCHEDULE_OVERLAPS),
  transfer: Type.Union([ScheduleTransfer, Type.Null()]),
  workflowId: Type.Union([Id, Type.Null()]),
  /** The next due time; null while the schedule is not active. */
  next_run_at: Type.Union([Timestamp, Type.Null()]),
  /** When the last run (of either trigger) started; null before the first. */
  last_run_at: Type.Union([Timestamp, Type.Null()]),
  /** The last run's status (its transfer's, as it is now); null before the first. */
  last_status: Type.Union([StringEnum(SCHEDULE_RUN_STATUSES), Type.Null()]),
  /** Whose authority it runs with: who last saved it (read-only; docs/security.md "Escalation rules"). */
  owner: AutomationOwner,
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Schedule = Static<typeof Schedule>;

/** One run of a schedule (GET /schedules/:id/runs, newest first). */
export const ScheduleRun = Type.Object({
  id: Id,
  schedule_id: Id,
  trigger: StringEnum(SCHEDULE_RUN_TRIGGERS),
  /** The due time it ran for (a manual run: when it was asked for). */
  scheduled_for: Timestamp,
  started_at: Timestamp,
  /** The transfer it created; null when it was skipped or its transfer could not be created. */
  transfer_id: Type.Union([Id, Type.Null()]),
  workflow_run_id: Type.Union([Id, Type.Null()]),
  status: StringEnum(SCHEDULE_RUN_STATUSES),
  /** Why it failed or was skipped; null otherwise. */
  error: Type.Union([Type.String(), Type.Null()]),
});
export type ScheduleRun = Static<typeof ScheduleRun>;

const Cron = Type.String({ minLength: 1, maxLength: 200 });
const TimeZone = Type.String({ minLength: 1, maxLength: 64 });
const TemplatePath = Type.String({ minLength: 1, maxLength: MAX_TRANSFER_PATH_LENGTH });

/** The `transfer` of a create or update: the fields of `POST /transfers` but `name` (the schedule's). */
export const ScheduleTransferInput = Type.Object(
  {
    sourceConnectionId: Type.String({ minLength: 1, maxLength: 64 }),
    sourcePath: TemplatePath,
    destinationConnectionId: Type.String({ minLength: 1, maxLength: 64 }),
    destinationPath: TemplatePath,
    options: Type.Optional(TransferOptionsInput),
  },
  { additionalProperties: false },
);
export type ScheduleTransferInput = Static<typeof ScheduleTransferInput>;

/** POST /schedules: exactly one of `transfer` and `workflowId`. */
export const CreateScheduleRequest = Type.Object(
  {
    name: Name,
    cron: Cron,
    timezone: Type.Optional(TimeZone),
    active: Type.Optional(Type.Boolean()),
    overlap: Type.Optional(StringEnum(SCHEDULE_OVERLAPS)),
    transfer: Type.Optional(ScheduleTransferInput),
    workflowId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  },
  { additionalProperties: false },
);
export type CreateScheduleRequest = Static<typeof CreateScheduleRequest>;

/** PUT /schedules/:id: the fields given change; a given `transfer` replaces the whole transfer. */
export const UpdateScheduleRequest = Type.Partial(CreateScheduleRequest, { additionalProperties: false });
export type UpdateScheduleRequest = Static<typeof UpdateScheduleRequest>;

export const ListSchedulesQuery = Type.Composite([PageQuery], { additionalProperties: false });
export type ListSchedulesQuery = Static<typeof ListSchedulesQuery>;

export const ListScheduleRunsQuery = Type.Composite([PageQuery], { additionalProperties: false });
export type ListScheduleRunsQuery = Static<typeof ListScheduleRunsQuery>;

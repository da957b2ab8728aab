import { Args, Flags } from '@oclif/core';
import {
  SCHEDULE_OVERLAPS, type Schedule, type ScheduleOverlap, type ScheduleRun, type ScheduleTransferInput, type UpdateScheduleRequest, type XferClient,
} from '@xfer/shared';
import type { Column } from '../output.js';
import { connectionIdOr, TRANSFER_OPTION_FLAGS, transferOptionFlags, transferOptions, type TransferOptionFlags } from './transfers.js';
import { workflowId } from './workflows.js';

export const scheduleColumns: Column<Schedule>[] = [
  { header: 'id', get: (s) => s.id },
  { header: 'name', get: (s) => s.name },
  { header: 'cron', get: (s) => s.cron },
  { header: 'timezone', get: (s) => s.timezone },
  { header: 'active', get: (s) => s.active },
  { header: 'next_run_at', get: (s) => s.next_run_at },
  { header: 'last_status', get: (s) => s.last_status },
];

export const scheduleRunColumns: Column<ScheduleRun>[] = [
  { header: 'id', get: (r) => r.id },
  { header: 'trigger', get: (r) => r.trigger },
  { header: 'scheduled_for', get: (r) => r.scheduled_for },
  { header: 'status', get: (r) => r.status },
  { header: 'transfer_id', get: (r) => r.transfer_id },
  { header: 'workflow_run_id', get: (r) => r.workflow_run_id },
  { header: 'error', get: (r) => r.error },
];

export const scheduleIdArg = { id: Args.string({ description: 'Schedule id', required: true }) };

/** Timing flags, named after the API's fields; create requires --cron. */
const timing = {
  timezone: Flags.string({ description: 'IANA time zone the cron expression is read in (server default: UTC)' }),
  overlap: Flags.string({ description: "A due time while the previous run's transfer has not ended: skip it or queue another (server default: skip)", options: [...SCHEDULE_OVERLAPS] }),
  active: Flags.boolean({ description: 'Fire on the timetable (--no-active: paused; runs only when asked)', allowNo: true }),
};

const sourceDesc = { description: 'Source connection: its id or its name' };
const sourcePathDesc = { description: 'File or directory on the source, starting with / (a template)' };
const destDesc = { description: 'Destination connection: its id or its name' };
const destPathDesc = { description: 'Directory on the destination, starting with / (a template)' };

const workflowDesc = { description: 'Run this workflow (its id or name) at each due time instead of a transfer' };

const PATH_FLAGS = ['source', 'source-path', 'dest', 'dest-path'] as const;
const TRANSFER_FLAGS = [...PATH_FLAGS, ...TRANSFER_OPTION_FLAGS] as const;
/** On a create, a transfer needs all four of its path flags: each depends on the others. */
const withTheOthers = (flag: (typeof PATH_FLAGS)[number]) => ({ dependsOn: PATH_FLAGS.filter((f) => f !== flag) });

/**
 * What each run does: the transfer of --source, --source-path, --dest, --dest-path (paths may hold
 * {{params.NAME}}, {{date:FORMAT}} and {{run.id}}), or --workflow. Both, or neither, are sent as
 * they are: the server's 400 says a schedule has exactly one.
 */
export const scheduleCreateFlags = {
  name: Flags.string({ description: 'Name of the schedule (and of the transfers it creates)', required: true }),
  cron: Flags.string({ description: 'Five fields: minute hour day-of-month month day-of-week, e.g. "0 2 * * *"', required: true }),
  ...timing,
  source: Flags.string({ ...sourceDesc, ...withTheOthers('source') }),
  'source-path': Flags.string({ ...sourcePathDesc, ...withTheOthers('source-path') }),
  dest: Flags.string({ ...destDesc, ...withTheOthers('dest') }),
  'dest-path': Flags.string({ ...destPathDesc, ...withTheOthers('dest-path') }),
  ...transferOptionFlags,
  workflow: Flags.string(workflowDesc),
};

export const scheduleUpdateFlags = {
  name: Flags.string({ description: 'New name' }),
  cron: Flags.string({ description: 'Five fields: minute hour day-of-month month day-of-week' }),
  ...timing,
  source: Flags.string(sourceDesc),
  'source-path': Flags.string(sourcePathDesc),
  dest: Flags.string(destDesc),
  'dest-path': Flags.string(destPathDesc),
  ...transferOptionFlags,
  workflow: Flags.string({ description: `${workflowDesc.description}: replaces the transfer` }),
};

type TransferFlags = Partial<Record<'source' | 'source-path' | 'dest' | 'dest-path', string>> & TransferOptionFlags;

/** Whether any flag of the transfer was given. */
export const givesTransfer = (f: TransferFlags): boolean => TRANSFER_FLAGS.some((k) => f[k] !== undefined);

/**
 * The `transfer` of a request: the flags given over `current` (an update changes only what it
 * names, but the API replaces the whole transfer). Connection names are looked up (GET /connections).
 */
export async function transferInput(client: XferClient, f: TransferFlags, current?: Schedule['transfer']): Promise<ScheduleTransferInput> {
  const options = transferOptions(f, current?.options);
  return {
    sourceConnectionId: await connectionIdOr(client, f.source, current?.sourceConnectionId),
    sourcePath: f['source-path'] ?? current?.sourcePath ?? '',
    destinationConnectionId: await connectionIdOr(client, f.dest, current?.destinationConnectionId),
    destinationPath: f['dest-path'] ?? current?.destinationPath ?? '',
    ...(options && { options }),
  };
}

/**
 * What the runs do, from the flags given: `transfer` (the transfer flags over `current`, see
 * transferInput) and `workflowId` (--workflow); neither when no such flag was given.
 */
export async function targetInput(
  client: XferClient, f: TransferFlags & { workflow?: string }, current?: Schedule['transfer'],
): Promise<Pick<UpdateScheduleRequest, 'transfer' | 'workflowId'>> {
  return {
    ...(givesTransfer(f) && { transfer: await transferInput(client, f, current) }),
    ...(f.workflow !== undefined && { workflowId: await workflowId(client, f.workflow) }),
  };
}

/** The timing fields given. */
export function timingInput(f: { name?: string; cron?: string; timezone?: string; overlap?: string; active?: boolean }) {
  return {
    ...(f.name !== undefined && { name: f.name }),
    ...(f.cron !== undefined && { cron: f.cron }),
    ...(f.timezone !== undefined && { timezone: f.timezone }),
    ...(f.overlap !== undefined && { overlap: f.overlap as ScheduleOverlap }),
    ...(f.active !== undefined && { active: f.active }),
  };
}

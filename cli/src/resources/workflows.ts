import { Args, Errors, Flags } from '@oclif/core';
import {
  ExitCode, WORKFLOW_ON_FAILURE, WORKFLOW_RUN_STATUSES,
  type RunWorkflowRequest, type Workflow, type WorkflowOnFailure, type WorkflowRun, type WorkflowRunStep, type WorkflowStep,
  type WorkflowStepInput, type XferClient,
} from '@xfer/shared';
import { usageError } from '../base-command.js';
import { readStdin, readTextFile } from '../input.js';
import { Messages } from '../messages.js';
import { record, table, type Column } from '../output.js';
import { formatBytes } from '../progress/index.js';
import { connectionId } from './transfers.js';

export const workflowColumns: Column<Workflow>[] = [
  { header: 'id', get: (w) => w.id },
  { header: 'name', get: (w) => w.name },
  { header: 'steps', get: (w) => w.steps.map((s) => s.type).join(',') },
  { header: 'on_failure', get: (w) => w.on_failure },
  { header: 'updated_at', get: (w) => w.updated_at },
];

export const workflowRunColumns: Column<WorkflowRun>[] = [
  { header: 'id', get: (r) => r.id },
  { header: 'status', get: (r) => r.status },
  { header: 'trigger', get: (r) => r.trigger.type },
  { header: 'steps', get: (r) => `${r.steps.filter((s) => s.status === 'completed').length}/${r.steps.length}` },
  { header: 'created_at', get: (r) => r.created_at },
  { header: 'completed_at', get: (r) => r.completed_at },
  { header: 'error', get: (r) => r.error },
];

/** What a step does, in a few words: the fields of its type. */
function stepSummary(s: WorkflowStep): string {
  switch (s.type) {
    case 'transfer': return `${s.sourceConnectionId}:${s.sourcePath} -> ${s.destinationConnectionId}:${s.destinationPath}${s.options ? ` ${JSON.stringify(s.options)}` : ''}`;
    case 'move_source': return `to ${String(s.to)}`;
    case 'delete_source': return 'the verified source files';
    case 'notify': return [s.channel, s.to && `to ${[s.to].flat().join(', ')}`, s.subject && `"${s.subject}"`].filter(Boolean).join(' ');
  }
}

/** What a run's step did: a transfer's id, a settle step's counts. */
function stepResult(s: WorkflowRunStep): string | null {
  if (s.files) return settleCounts(s.files);
  return s.transfer_id && `transfer ${s.transfer_id}`;
}

/** `3 moved, 1 gone`: the counts of a move_source/delete_source step that are not zero (`nothing` when all are). */
export function settleCounts(files: NonNullable<WorkflowRunStep['files']>): string {
  const parts = Object.entries(files).filter(([, n]) => n > 0).map(([k, n]) => `${n} ${k}`);
  return parts.length > 0 ? parts.join(', ') : 'nothing';
}

const stepNumber = (_: unknown, i: number) => i + 1;

/** A workflow for people: its fields as lines, then its steps as a table. */
export function showWorkflow(w: Workflow): string {
  const { steps, ...rest } = w;
  const rows = steps.map((s, i) => ({ n: stepNumber(s, i), type: s.type, what: stepSummary(s) }));
  return `${record(rest)}\n\n${table(rows, [{ header: '#', get: (r) => r.n }, { header: 'type', get: (r) => r.type }, { header: 'what', get: (r) => r.what }])}`;
}

/** A run for people: its fields as lines (the trigger as `type id`), then each step's status as a table. */
export function showRun(r: WorkflowRun): string {
  const { steps, ...rest } = r;
  const fields = { ...rest, trigger: r.trigger.id ? `${r.trigger.type} ${r.trigger.id}` : r.trigger.type, params: r.params.join(', ') || null };
  const rows = steps.map((s, i) => ({ ...s, n: stepNumber(s, i) }));
  return `${record(fields)}\n\n${table(rows, [
    { header: '#', get: (s) => s.n },
    { header: 'type', get: (s) => s.type },
    { header: 'status', get: (s) => s.status },
    { header: 'result', get: stepResult },
    { header: 'started_at', get: (s) => s.started_at },
    { header: 'completed_at', get: (s) => s.completed_at },
    { header: 'error', get: (s) => s.error },
  ])}`;
}

/** `Step 2/3 move_source: completed (4 moved)` — one line of `--follow`. */
export function stepLine(run: WorkflowRun, i: number, figures?: string): string {
  const s = run.steps[i]!;
  const detail = figures ?? (s.files ? settleCounts(s.files) : s.status === 'running' && s.transfer_id ? `transfer ${s.transfer_id}` : null);
  return `Step ${i + 1}/${run.steps.length} ${s.type}: ${s.status}${detail ? ` (${detail})` : ''}${s.error ? `: ${s.error}` : ''}`;
}

/** A transfer's figures for a step line: `6/6 files, 12.3 kB`. */
export const transferFigures = (t: { files_transferred: number; files_skipped: number; files_total: number; bytes_transferred: number }): string =>
  `${t.files_transferred + t.files_skipped}/${t.files_total} files, ${formatBytes(t.bytes_transferred)}`;

export const workflowIdArg = { id: Args.string({ description: 'Workflow id or name', required: true }) };
export const workflowRunIdArg = { id: Args.string({ description: 'Workflow run id (the id "workflows run" prints)', required: true }) };

const stepsDescription = 'The steps, a JSON array: inline, @FILE to read a file, or - for stdin. Each is {"type": "transfer"|"move_source"|"delete_source"|"notify", …}; a transfer\'s connections may be ids or names';
const onFailure = Flags.string({ description: 'After a failed step: stop (skip the rest) or continue (server default: stop)', options: [...WORKFLOW_ON_FAILURE] });

export const workflowCreateFlags = {
  name: Flags.string({ description: 'Name of the workflow (and of the transfers its runs create)', required: true }),
  steps: Flags.string({ description: stepsDescription, required: true }),
  'on-failure': onFailure,
};

export const workflowUpdateFlags = {
  name: Flags.string({ description: 'New name' }),
  steps: Flags.string({ description: `${stepsDescription}. Replaces every step (runs under way keep theirs)` }),
  'on-failure': onFailure,
};

export const runStatusFlag = Flags.string({ description: 'Only runs in this state', options: [...WORKFLOW_RUN_STATUSES] });

/** The text `--steps` stands for: itself, a file's content (@FILE) or stdin (-). */
async function stepsText(value: string): Promise<string> {
  if (value === '-') return readStdin();
  if (!value.startsWith('@')) return value;
  const path = value.slice(1);
  try {
    return readTextFile(path);
  } catch (err) {
    throw usageError(Messages.stepsFileUnreadable(path, (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message));
  }
}

const OBJECT_ID = /^[0-9a-f]{24}$/i;

/**
 * The id of a workflow given by id or by name. Names need not be unique: a name is looked up
 * (GET /workflows, every page) and must name exactly one workflow (exit 4 for none, 2 for several,
 * listing their ids). 24 hex digits are taken for an id.
 */
export async function workflowId(client: XferClient, ref: string): Promise<string> {
  if (OBJECT_ID.test(ref)) return ref;
  const ids: string[] = [];
  for await (const w of client.workflows.all({ limit: 1000 })) if (w.name === ref) ids.push(w.id);
  if (ids.length === 0) throw new Errors.CLIError(Messages.workflowNotFound(ref), { exit: ExitCode.notFound });
  if (ids.length > 1) throw usageError(Messages.workflowNameTaken(ref, ids));
  return ids[0]!;
}

const CONNECTION_FIELDS = ['sourceConnectionId', 'destinationConnectionId'] as const;

/**
 * The `steps` of a request from `--steps`. Only the shape the CLI needs is checked here (a JSON
 * array of objects: exit 2 naming --steps); the fields of each step are the server's to check (its
 * 400 names `steps[i].field`). A transfer step's connection given by name is looked up
 * (GET /connections), as `--source` and `--dest` are, once per name.
 */
export async function readSteps(client: XferClient, value: string): Promise<WorkflowStepInput[]> {
  let steps: unknown;
  try { steps = JSON.parse(await stepsText(value)); } catch (err) {
    if (err instanceof SyntaxError) throw usageError(Messages.stepsNotJson(err.message));
    throw err;
  }
  if (!Array.isArray(steps)) throw usageError(Messages.stepsNotJson('expected an array of steps'));
  const bad = steps.findIndex((s) => typeof s !== 'object' || s === null || Array.isArray(s));
  if (bad >= 0) throw usageError(Messages.stepsNotJson(`step ${bad + 1} is not an object`));
  const ids = new Map<string, Promise<string>>();
  for (const step of steps as Array<Record<string, unknown>>) {
    for (const field of CONNECTION_FIELDS) {
      const ref = step[field];
      if (typeof ref !== 'string' || ref === '' || OBJECT_ID.test(ref)) continue;
      if (!ids.has(ref)) ids.set(ref, connectionId(client, ref));
      step[field] = await ids.get(ref)!;
    }
  }
  return steps as WorkflowStepInput[];
}

/** The fields of a create or update given as flags (steps read and their connection names looked up). */
export async function workflowInput(client: XferClient, f: { name?: string; steps?: string; 'on-failure'?: string }) {
  return {
    ...(f.name !== undefined && { name: f.name }),
    ...(f.steps !== undefined && { steps: await readSteps(client, f.steps) }),
    ...(f['on-failure'] !== undefined && { on_failure: f['on-failure'] as WorkflowOnFailure }),
  };
}

const PARAM = /^([^=]+)=(.*)$/s;

/** `--param NAME=VALUE …` as the run's `params`; exit 2 naming --param for a malformed or repeated one. */
export function runParams(given: readonly string[] | undefined): RunWorkflowRequest {
  if (!given || given.length === 0) return {};
  const params: Record<string, string> = {};
  for (const text of given) {
    const m = PARAM.exec(text);
    if (!m) throw usageError(Messages.badRunParam(text));
    const [, name, value] = m as unknown as [string, string, string];
    if (Object.hasOwn(params, name)) throw usageError(Messages.runParamTwice(name));
    params[name] = value;
  }
  return { params };
}

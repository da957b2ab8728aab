import { Type, type Static } from '@sinclair/typebox';
import { Id, Name, PageQuery, StringEnum, Timestamp } from './common.js';
import { JobOptions } from '../protocol/agent-protocol.js';
import { PARAMETER_NAME_PATTERN, PARAMETER_VALUE_MAX_LENGTH } from './parameters.js';
import { MAX_TRANSFER_PATH_LENGTH, TransferOptionsInput } from './transfers.js';

/** The kinds of workflow step (scope-areas.md "Workflows"; docs/automation.md "Workflows"). */
export const WORKFLOW_STEP_TYPES = ['transfer', 'move_source', 'delete_source', 'notify'] as const;
export type WorkflowStepType = (typeof WORKFLOW_STEP_TYPES)[number];

/** Where a notify step sends its message. */
export const NOTIFY_CHANNELS = ['email', 'webhook_event'] as const;
export type NotifyChannel = (typeof NOTIFY_CHANNELS)[number];

/** What a failed step does to the rest of its run: `stop` skips the steps after it, `continue` runs them. */
export const WORKFLOW_ON_FAILURE = ['stop', 'continue'] as const;
export type WorkflowOnFailure = (typeof WORKFLOW_ON_FAILURE)[number];

export const WORKFLOW_RUN_STATUSES = ['queued', 'running', 'completed', 'failed', 'cancelled'] as const;
export type WorkflowRunStatus = (typeof WORKFLOW_RUN_STATUSES)[number];

/** `skipped`: not run (an earlier step failed under `on_failure: stop`, or the run was cancelled before it). */
export const WORKFLOW_STEP_STATUSES = ['pending', 'running', 'completed', 'failed', 'skipped', 'cancelled'] as const;
export type WorkflowStepStatus = (typeof WORKFLOW_STEP_STATUSES)[number];

/** What started a run: `POST /workflows/:id/run`, a schedule's due time, or a watcher's new file. */
export const WORKFLOW_TRIGGERS = ['manual', 'schedule', 'watcher'] as const;
export type WorkflowTrigger = (typeof WORKFLOW_TRIGGERS)[number];

/** Steps one workflow holds at most. */
export const MAX_WORKFLOW_STEPS = 20;
/** Run parameters one run may be given at most. */
export const MAX_RUN_PARAMS = 50;

/**
 * One step as every read shows it: `type` and the fields of that type. transfer:
 * `sourceConnectionId`, `sourcePath`, `destinationConnectionId`, `destinationPath`, `options`;
 * move_source: `to`; delete_source: none; notify: `channel`, `subject`, `to`.
 */
export const WorkflowStep = Type.Object({
  type: StringEnum(WORKFLOW_STEP_TYPES),
  sourceConnectionId: Type.Optional(Id),
  sourcePath: Type.Optional(Type.String()),
  destinationConnectionId: Type.Optional(Id),
  destinationPath: Type.Optional(Type.String()),
  options: Type.Optional(JobOptions),
  /** move_source: the folder on the source connection the files go under (a template); notify by email: the recipients. */
  to: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
  channel: Type.Optional(StringEnum(NOTIFY_CHANNELS)),
  subject: Type.Optional(Type.String()),
});
export type WorkflowStep = Static<typeof WorkflowStep>;

export const Workflow = Type.Object({
  id: Id,
  name: Type.String(),
  steps: Type.Array(WorkflowStep),
  on_failure: StringEnum(WORKFLOW_ON_FAILURE),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type Workflow = Static<typeof Workflow>;

/** What a move_source or delete_source step did, file by file (settle-protocol.ts `SETTLE_OUTCOMES`). */
export const SettleCounts = Type.Object({
  moved: Type.Integer(),
  deleted: Type.Integer(),
  /** Already gone from the source (nothing to do). */
  gone: Type.Integer(),
  /** Changed at the source since its copy was verified: left where it was. */
  changed: Type.Integer(),
  /** Copied but not verified by this transfer (skipped because the destination had it, or failed): left where it was. */
  unverified: Type.Integer(),
  failed: Type.Integer(),
});
export type SettleCounts = Static<typeof SettleCounts>;

export const WorkflowRunStep = Type.Object({
  type: StringEnum(WORKFLOW_STEP_TYPES),
  status: StringEnum(WORKFLOW_STEP_STATUSES),
  /** A transfer step's transfer (created when the step started). */
  transfer_id: Type.Union([Id, Type.Null()]),
  /** move_source / delete_source: what became of the transfer's files. */
  files: Type.Union([SettleCounts, Type.Null()]),
  error: Type.Union([Type.String(), Type.Null()]),
  started_at: Type.Union([Timestamp, Type.Null()]),
  completed_at: Type.Union([Timestamp, Type.Null()]),
});
export type WorkflowRunStep = Static<typeof WorkflowRunStep>;

export const WorkflowRun = Type.Object({
  id: Id,
  workflow_id: Id,
  workflow_name: Type.String(),
  status: StringEnum(WORKFLOW_RUN_STATUSES),
  steps: Type.Array(WorkflowRunStep),
  /** `id`: the schedule or watcher that started it (null for a manual run). */
  trigger: Type.Object({ type: StringEnum(WORKFLOW_TRIGGERS), id: Type.Union([Id, Type.Null()]) }),
  /** The file a watcher saw (`{{file.*}}`); null for other triggers. */
  file: Type.Union([Type.Object({ name: Type.String(), path: Type.String() }), Type.Null()]),
  /** The names of the run parameters it was given (never their values: they may be secrets). */
  params: Type.Array(Type.String()),
  /** Why it failed (the first failed step's error), or that it was cancelled; null otherwise. */
  error: Type.Union([Type.String(), Type.Null()]),
  created_at: Timestamp,
  completed_at: Type.Union([Timestamp, Type.Null()]),
});
export type WorkflowRun = Static<typeof WorkflowRun>;

const TemplatePath = Type.String({ minLength: 1, maxLength: MAX_TRANSFER_PATH_LENGTH });

/**
 * One step of a create or update. One flat object rather than a union per type, so that a wrong
 * field is a 400 naming `steps[i].field` (the service checks which fields each type takes).
 */
export const WorkflowStepInput = Type.Object(
  {
    type: StringEnum(WORKFLOW_STEP_TYPES),
    sourceConnectionId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    sourcePath: Type.Optional(TemplatePath),
    destinationConnectionId: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    destinationPath: Type.Optional(TemplatePath),
    options: Type.Optional(TransferOptionsInput),
    to: Type.Optional(Type.Union([TemplatePath, Type.Array(Type.String({ minLength: 3, maxLength: 254 }), { minItems: 1, maxItems: 50 })])),
    channel: Type.Optional(StringEnum(NOTIFY_CHANNELS)),
    subject: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  },
  { additionalProperties: false },
);
export type WorkflowStepInput = Static<typeof WorkflowStepInput>;

/** POST /workflows. */
export const CreateWorkflowRequest = Type.Object(
  {
    name: Name,
    steps: Type.Array(WorkflowStepInput, { minItems: 1, maxItems: MAX_WORKFLOW_STEPS }),
    on_failure: Type.Optional(StringEnum(WORKFLOW_ON_FAILURE)),
  },
  { additionalProperties: false },
);
export type CreateWorkflowRequest = Static<typeof CreateWorkflowRequest>;

/** PUT /workflows/:id: the fields given change; given `steps` replace all steps. Runs under way keep the steps they started with. */
export const UpdateWorkflowRequest = Type.Partial(CreateWorkflowRequest, { additionalProperties: false });
export type UpdateWorkflowRequest = Static<typeof UpdateWorkflowRequest>;

/** POST /workflows/:id/run: values for `{{params.NAME}}` in this run, over the account's parameters of those names. */
export const RunWorkflowRequest = Type.Object(
  {
    params: Type.Optional(Type.Record(
      Type.String({ pattern: PARAMETER_NAME_PATTERN }),
      Type.String({ maxLength: PARAMETER_VALUE_MAX_LENGTH }),
      { maxProperties: MAX_RUN_PARAMS },
    )),
  },
  { additionalProperties: false },
);
export type RunWorkflowRequest = Static<typeof RunWorkflowRequest>;

export const ListWorkflowsQuery = Type.Composite([PageQuery], { additionalProperties: false });
export type ListWorkflowsQuery = Static<typeof ListWorkflowsQuery>;

export const ListWorkflowRunsQuery = Type.Composite(
  [PageQuery, Type.Object({ status: Type.Optional(StringEnum(WORKFLOW_RUN_STATUSES)) })],
  { additionalProperties: false },
);
export type ListWorkflowRunsQuery = Static<typeof ListWorkflowRunsQuery>;

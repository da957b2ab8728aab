import { Type, type Static } from '@sinclair/typebox';
import { ConnectionSettings } from '../schemas/connections.js';
import { StringEnum } from '../schemas/common.js';
import { JobOptions } from './job-options.js';

/**
 * Plans over the agent protocol (issue 25; docs/api.md "Plans"). `POST /transfers/:id/plan`
 * sends `plan.assign` to an agent serving both connections; the agent lists both sides, compares
 * them exactly as a run would (agent/src/copy), writes nothing, and streams what a run would do as
 * `plan.items` batches, then `plan.done` with the summary and the fingerprint (or `plan.failed`).
 * The control plane stores the items. `POST /transfers/:id/execute {plan_id}` then assigns the job
 * with `job.assign.plan_id`: the agent pages through the stored items (`job.plan.query` →
 * `job.plan.page`) and applies exactly those, each only when both sides still look as the plan saw
 * them (else the file is reported `skipped`, reason `changed since plan`).
 */

/** What a run would do with one path. */
export const PLAN_ACTIONS = ['copy', 'update', 'delete', 'skip'] as const;
export type PlanAction = (typeof PLAN_ACTIONS)[number];

/** What the plan saw of one side of a path: enough to tell, at apply time, whether it changed. */
export const PlanSide = Type.Object({
  size: Type.Integer({ minimum: 0 }),
  /** ISO 8601, when the store gave one. */
  mtime: Type.Optional(Type.String({ maxLength: 40 })),
  /** `<algorithm>:<hex>` of the store's own checksum, when it gave one. */
  checksum: Type.Optional(Type.String({ maxLength: 200 })),
});
export type PlanSide = Static<typeof PlanSide>;

/**
 * One path of a plan. `path` is relative to the transfer's source path (as in per-file results);
 * `delete` items are destination files (`sync`) the source does not have. `move` runs plan
 * `copy`/`update` (and `skip` of a file already there): each source file is deleted once copied.
 */
export const PlanItem = Type.Object({
  path: Type.String({ minLength: 1, maxLength: 4096 }),
  action: StringEnum(PLAN_ACTIONS),
  reason: Type.String({ maxLength: 200 }),
  source: Type.Optional(PlanSide),
  destination: Type.Optional(PlanSide),
});
export type PlanItem = Static<typeof PlanItem>;

/** Counts and bytes per action; `bytes` of copy/update are source sizes, of delete destination sizes. */
export const PlanSummary = Type.Object({
  copy: Type.Integer({ minimum: 0 }),
  update: Type.Integer({ minimum: 0 }),
  delete: Type.Integer({ minimum: 0 }),
  skip: Type.Integer({ minimum: 0 }),
  copy_bytes: Type.Integer({ minimum: 0 }),
  update_bytes: Type.Integer({ minimum: 0 }),
  delete_bytes: Type.Integer({ minimum: 0 }),
  /** Set when the deletions exceed `max_delete`: applying the plan deletes nothing and fails saying so. */
  delete_refused: Type.Optional(Type.String({ maxLength: 500 })),
});
export type PlanSummary = Static<typeof PlanSummary>;

/** Items one `plan.items` or `job.plan.page` carries at most. */
export const MAX_PLAN_ITEMS_PER_FRAME = 1000;

const PlanRef = { plan_id: Type.String({ minLength: 1, maxLength: 64 }) };

export const PlanServerToAgent = {
  /** Compute a plan: list and compare both sides as a run of `options` would, write nothing. */
  'plan.assign': Type.Object({
    ...PlanRef,
    source: ConnectionSettings,
    source_path: Type.String({ minLength: 1, maxLength: 4096 }),
    destination: ConnectionSettings,
    destination_path: Type.String({ minLength: 1, maxLength: 4096 }),
    options: JobOptions,
  }),
  /** Stop computing a plan (deleted, expired, or the control plane gave up on it). */
  'plan.cancel': Type.Object({ ...PlanRef }),
  /** Answer to `job.plan.query`: the next items of the job's plan in path order; `done` when none follow. */
  'job.plan.page': Type.Object({
    request_id: Type.String({ maxLength: 64 }),
    items: Type.Array(PlanItem, { maxItems: MAX_PLAN_ITEMS_PER_FRAME }),
    done: Type.Boolean(),
  }),
} as const;

export const PlanAgentToServer = {
  /** Items of a plan being computed, in path order; `seq` numbers the batches from 1 (a batch sent twice is stored once). */
  'plan.items': Type.Object({
    ...PlanRef,
    seq: Type.Integer({ minimum: 1 }),
    items: Type.Array(PlanItem, { minItems: 1, maxItems: MAX_PLAN_ITEMS_PER_FRAME }),
  }),
  /** The plan is complete: `batches` items frames were sent; `fingerprint` is the hex SHA-256 of what it saw (both listings). */
  'plan.done': Type.Object({
    ...PlanRef,
    batches: Type.Integer({ minimum: 0 }),
    summary: PlanSummary,
    fingerprint: Type.String({ pattern: '^[0-9a-f]{64}$' }),
  }),
  'plan.failed': Type.Object({ ...PlanRef, error: Type.String({ maxLength: 4000 }) }),
  /**
   * The next items of the plan the job applies (`job.assign.plan_id`), after the path `after`
   * (absent: from the first), at most `limit`. Answered only for a job this session runs now.
   */
  'job.plan.query': Type.Object({
    job_id: Type.String({ minLength: 1, maxLength: 64 }),
    request_id: Type.String({ minLength: 1, maxLength: 64 }),
    after: Type.Optional(Type.String({ maxLength: 4096 })),
    limit: Type.Integer({ minimum: 1, maximum: MAX_PLAN_ITEMS_PER_FRAME }),
  }),
} as const;

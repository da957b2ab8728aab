import { Type, type Static } from '@sinclair/typebox';
import { Id, PageQuery, StringEnum, Timestamp } from './common.js';
import { PLAN_ACTIONS, PlanItem, PlanSummary } from '../protocol/plan-protocol.js';

/**
 * Plans of a transfer over the API (issue 25; docs/api.md "Sync, move and plans"): what a run of
 * the transfer would copy, update, delete and skip, computed by an agent that writes nothing, to be
 * reviewed and then applied exactly (`POST /transfers/:id/execute {plan_id}`).
 */
export const PLAN_STATUSES = ['planning', 'ready', 'failed'] as const;
export type PlanStatus = (typeof PLAN_STATUSES)[number];

export const TransferPlan = Type.Object({
  id: Id,
  transferId: Id,
  status: StringEnum(PLAN_STATUSES),
  /** Counts and bytes per action once `ready`; null before, and when it failed. */
  summary: Type.Union([PlanSummary, Type.Null()]),
  /** Hex SHA-256 of both listings as the agent saw them; null until `ready`. */
  fingerprint: Type.Union([Type.String(), Type.Null()]),
  /** The agent that computed it. */
  agent_id: Type.Union([Id, Type.Null()]),
  /** Why it failed; null otherwise. */
  error: Type.Union([Type.String(), Type.Null()]),
  created_at: Timestamp,
  /** After this it can no longer be executed (XFER_PLAN_TTL after its creation). */
  expires_at: Timestamp,
  /** `expires_at` has passed. */
  expired: Type.Boolean(),
});
export type TransferPlan = Static<typeof TransferPlan>;

/** `POST /transfers/:id/plan?wait=false`: answer 202 with the plan while it is computed. */
export const CreatePlanQuery = Type.Object(
  { wait: Type.Optional(Type.Boolean({ default: true })) },
  { additionalProperties: false },
);
export type CreatePlanQuery = Static<typeof CreatePlanQuery>;

/** `GET /transfers/:id/plan/items`: in path order, one page; `action` narrows them. */
export const ListPlanItemsQuery = Type.Composite(
  [PageQuery, Type.Object({ action: Type.Optional(StringEnum(PLAN_ACTIONS)) })],
  { additionalProperties: false },
);
export type ListPlanItemsQuery = Static<typeof ListPlanItemsQuery>;

/** One item of a plan as the API shows it. */
export const TransferPlanItem = PlanItem;
export type TransferPlanItem = PlanItem;

/** Body of `POST /transfers/:id/execute`: with `plan_id`, the run applies exactly that plan. */
export const ExecuteTransferBody = Type.Object(
  { plan_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })) },
  { additionalProperties: false },
);
export type ExecuteTransferBody = Static<typeof ExecuteTransferBody>;

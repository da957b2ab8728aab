import { Type, type Static } from '@sinclair/typebox';
import { Id, PageQuery, StringEnum, Timestamp } from './common.js';

/**
 * `room_member`: an outside party invited to a data room, acting with its invite token.
 * `service_principal`: an API key issued for a registered service principal acts as it (`id` = its client_id).
 */
export const ACTOR_TYPES = ['api_key', 'user', 'agent', 'share_link', 'room_member', 'system', 'service_principal'] as const;

export const Actor = Type.Object({
  type: StringEnum(ACTOR_TYPES),
  id: Type.Union([Type.String(), Type.Null()]),
});
export type Actor = Static<typeof Actor>;

/** One record of the audit trail (decisions.md "Audit and rate limits"). */
export const AuditEvent = Type.Object({
  id: Id,
  timestamp: Timestamp,
  account_id: Type.Union([Type.String(), Type.Null()]),
  actor: Actor,
  action: Type.String(),
  resource: Type.Union([Type.Object({ type: Type.String(), id: Type.Union([Type.String(), Type.Null()]) }), Type.Null()]),
  ip: Type.Union([Type.String(), Type.Null()]),
  outcome: StringEnum(['success', 'failure', 'denied'] as const),
  details: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});
export type AuditEvent = Static<typeof AuditEvent>;

export const ActivityQuery = Type.Composite([
  PageQuery,
  Type.Object({
    action: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    actor_type: Type.Optional(StringEnum(ACTOR_TYPES)),
    actor_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    resource_type: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    resource_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    since: Type.Optional(Type.String({ format: 'date-time' })),
    until: Type.Optional(Type.String({ format: 'date-time' })),
  }),
], { additionalProperties: false });
export type ActivityQuery = Static<typeof ActivityQuery>;

/** The longest window `GET /activity/summary` counts over, in days. */
export const ACTIVITY_SUMMARY_MAX_DAYS = 366;

/**
 * `GET /activity/summary?from&to`: `from` inclusive, `to` exclusive (ISO 8601). `to` defaults to
 * now, `from` to 24 hours before `to`; the window is at most ACTIVITY_SUMMARY_MAX_DAYS long.
 */
export const ActivitySummaryQuery = Type.Object(
  {
    from: Type.Optional(Type.String({ format: 'date-time' })),
    to: Type.Optional(Type.String({ format: 'date-time' })),
  },
  { additionalProperties: false },
);
export type ActivitySummaryQuery = Static<typeof ActivitySummaryQuery>;

/**
 * Dashboard counters of one account over a window (docs/api.md "Activity"): the transfers created
 * in it by their status now, what they moved, and the audited uploads, downloads and blocked
 * uploads in it.
 */
export const ActivitySummary = Type.Object({
  from: Timestamp,
  to: Timestamp,
  transfers: Type.Object({
    total: Type.Integer(),
    by_status: Type.Object({
      queued: Type.Integer(), 'in-progress': Type.Integer(), completed: Type.Integer(), failed: Type.Integer(), cancelled: Type.Integer(),
    }),
  }),
  bytes_moved: Type.Integer(),
  files_moved: Type.Integer(),
  uploads: Type.Integer(),
  downloads: Type.Integer(),
  blocked_uploads: Type.Integer(),
  active_agents: Type.Integer(),
});
export type ActivitySummary = Static<typeof ActivitySummary>;

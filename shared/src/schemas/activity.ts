import { Type, type Static } from '@sinclair/typebox';
import { Id, PageQuery, StringEnum, Timestamp } from './common.js';

/** `room_member`: an outside party invited to a data room, acting with its invite token. */
export const ACTOR_TYPES = ['api_key', 'user', 'agent', 'share_link', 'room_member', 'system'] as const;

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

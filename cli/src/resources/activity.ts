import { Flags } from '@oclif/core';
import { ACTOR_TYPES, type ActivityQuery, type AuditEvent } from '@xfer/shared';
import type { Column } from '../output.js';

const ref = (r: { type: string; id: string | null } | null) => (r ? (r.id ? `${r.type}:${r.id}` : r.type) : null);

/** The audit trail's table, also used for the signed-in user's login events. */
export const auditEventColumns: Column<AuditEvent>[] = [
  { header: 'time', get: (e) => e.timestamp },
  { header: 'actor', get: (e) => ref(e.actor) },
  { header: 'action', get: (e) => e.action },
  { header: 'resource', get: (e) => ref(e.resource) },
  { header: 'outcome', get: (e) => e.outcome },
];

/** One flag per filter of ActivityQuery, named after the query parameter. */
export const activityFilterFlags = {
  action: Flags.string({ description: 'Only this action, e.g. webhook.create, user.login' }),
  'actor-type': Flags.string({ description: 'Only events by this kind of actor', options: [...ACTOR_TYPES] }),
  'actor-id': Flags.string({ description: 'Only events by this actor (user, API key or agent id)' }),
  'resource-type': Flags.string({ description: 'Only events on this kind of resource, e.g. webhook, user, connection' }),
  'resource-id': Flags.string({ description: 'Only events on this resource id' }),
  since: Flags.string({ description: 'Only events at or after this ISO 8601 time, e.g. 2026-01-31T00:00:00Z' }),
  until: Flags.string({ description: 'Only events before this ISO 8601 time' }),
};

type FilterFlags = { action?: string; 'actor-type'?: string; 'actor-id'?: string; 'resource-type'?: string; 'resource-id'?: string; since?: string; until?: string };

/** The query of `activityFilterFlags`; absent flags are left out. */
export function activityQuery(f: FilterFlags): Omit<ActivityQuery, 'limit' | 'cursor'> {
  return {
    action: f.action,
    actor_type: f['actor-type'] as ActivityQuery['actor_type'],
    actor_id: f['actor-id'],
    resource_type: f['resource-type'],
    resource_id: f['resource-id'],
    since: f.since,
    until: f.until,
  };
}

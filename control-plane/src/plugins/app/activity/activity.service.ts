import type { Types } from 'mongoose';
import type { ActivityQuery, AuditEvent, PageQuery } from '@xfer/shared';
import type { AuditEventDoc } from '../../../models/audit-event.model.js';
import type { Models } from '../../../models/index.js';
import { BadRequestError } from '../../../errors.js';
import { paginate } from '../../../lib/pagination.js';

/** What the activity service needs. */
export interface ActivityServiceOptions {
  db: Models;
}

/** One audit record as the API shows it (shared `AuditEvent`). */
export function presentAuditEvent(doc: AuditEventDoc & { _id: Types.ObjectId }): AuditEvent {
  const details = doc.details as Record<string, unknown> | undefined;
  return {
    id: String(doc._id),
    timestamp: doc.timestamp.toISOString(),
    account_id: doc.account_id ? String(doc.account_id) : null,
    actor: { type: (doc.actor?.type ?? 'system') as AuditEvent['actor']['type'], id: doc.actor?.id ?? null },
    action: doc.action,
    // Records without a resource still get an empty sub-document from mongoose: show null.
    resource: doc.resource?.type ? { type: doc.resource.type, id: doc.resource.id ?? null } : null,
    ip: doc.ip ?? null,
    outcome: doc.outcome,
    ...(details ? { details } : {}),
  };
}

function instant(value: string, field: string): Date {
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) throw new BadRequestError(`querystring.${field} must be an ISO 8601 date-time`);
  return date;
}

/**
 * The filter of `GET /activity` for one account. `since` is inclusive and `until` exclusive, so
 * consecutive windows neither overlap nor leave gaps. An `action` ending in `.*` matches the
 * prefix (`auth.*`); any other value matches exactly.
 */
export function activityFilter(accountId: string, query: ActivityQuery): Record<string, unknown> {
  const filter: Record<string, unknown> = { account_id: accountId };
  if (query.action !== undefined) {
    filter.action = query.action.endsWith('.*')
      ? { $regex: `^${query.action.slice(0, -1).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}` }
      : query.action;
  }
  if (query.actor_type !== undefined) filter['actor.type'] = query.actor_type;
  if (query.actor_id !== undefined) filter['actor.id'] = query.actor_id;
  if (query.resource_type !== undefined) filter['resource.type'] = query.resource_type;
  if (query.resource_id !== undefined) filter['resource.id'] = query.resource_id;
  const since = query.since === undefined ? null : instant(query.since, 'since');
  const until = query.until === undefined ? null : instant(query.until, 'until');
  if (since && until && since >= until) throw new BadRequestError('querystring.since must be earlier than querystring.until');
  if (since || until) filter.timestamp = { ...(since ? { $gte: since } : {}), ...(until ? { $lt: until } : {}) };
  return filter;
}

/** Reads of the audit trail, newest first (decisions.md "Audit and rate limits"); writes go through the audit service. */
export class ActivityService {
  private readonly db: Models;

  constructor(opts: ActivityServiceOptions) {
    this.db = opts.db;
  }

  /** The account's records matching `query` (`activityFilter`), one page. */
  list(accountId: string, query: ActivityQuery) {
    return paginate(this.db.auditEvents, activityFilter(accountId, query), query, presentAuditEvent);
  }

  /** One user's sign-ins, successful and failed, one page. */
  loginEvents(accountId: string, userId: string, query: PageQuery) {
    const filter = { account_id: accountId, action: 'auth.login', 'actor.type': 'user', 'actor.id': userId };
    return paginate(this.db.auditEvents, filter, query, presentAuditEvent);
  }
}

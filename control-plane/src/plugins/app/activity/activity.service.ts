import { Types } from 'mongoose';
import {
  ACTIVITY_SUMMARY_MAX_DAYS, TRANSFER_STATUSES,
  type ActivityQuery, type ActivitySummary, type ActivitySummaryQuery, type AuditEvent, type PageQuery, type TransferStatus,
} from '@xfer/shared';
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

const DAY_MS = 24 * 60 * 60 * 1000;
/**
 * How far an `_id`'s creation time may lie from the record's own time field (set by the same
 * process a moment before the insert; retries of an audit append take milliseconds): the `_id`
 * range, which an index on `(account_id, …, _id)` serves, is this much wider than the window, and
 * the time field then cuts it exactly.
 */
const ID_SLACK_MS = 60_000;

/** `_id` bounds around `[from, to)`, widened by ID_SLACK_MS (see there). */
function idRange(from: Date, to: Date) {
  const at = (ms: number) => Types.ObjectId.createFromTime(Math.max(0, Math.floor(ms / 1000)));
  return { $gte: at(from.getTime() - ID_SLACK_MS), $lt: at(to.getTime() + ID_SLACK_MS + 1000) };
}

/** The window of a summary: `to` defaults to `now`, `from` to a day before `to`; 400 for an empty or too long one. */
export function summaryWindow(query: ActivitySummaryQuery, now = new Date()): { from: Date; to: Date } {
  const to = query.to === undefined ? now : instant(query.to, 'to');
  const from = query.from === undefined ? new Date(to.getTime() - DAY_MS) : instant(query.from, 'from');
  if (from >= to) throw new BadRequestError('querystring.from must be earlier than querystring.to');
  if (to.getTime() - from.getTime() > ACTIVITY_SUMMARY_MAX_DAYS * DAY_MS) {
    throw new BadRequestError(`querystring.from and querystring.to must be at most ${ACTIVITY_SUMMARY_MAX_DAYS} days apart`);
  }
  return { from, to };
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

  /**
   * The dashboard counters of `GET /activity/summary` over `[from, to)` (docs/api.md "Activity"):
   * the transfers created in the window by their status now, the bytes and files they moved and the
   * agents that ran them; uploads, downloads and blocked uploads as the audit trail recorded them
   * (`file.upload` success, `file.download` success, `file.upload` denied). Each is one query over
   * the account's index on `_id` (audit: `(account_id, action, _id)`; transfers: `(account_id,
   * _id)`): counts by the database, the transfers' sums in one cursor pass. Reads only.
   */
  async summary(accountId: string, query: ActivitySummaryQuery): Promise<ActivitySummary> {
    const { from, to } = summaryWindow(query);
    const account = new Types.ObjectId(accountId);
    const transfers = { account_id: account, _id: idRange(from, to), created_at: { $gte: from, $lt: to } };
    const audited = (action: string, outcome: string) => this.db.auditEvents.countDocuments({
      account_id: account, action, _id: idRange(from, to), timestamp: { $gte: from, $lt: to }, outcome,
    });
    const [tally, uploads, downloads, blocked] = await Promise.all([
      this.tallyTransfers(transfers),
      audited('file.upload', 'success'),
      audited('file.download', 'success'),
      audited('file.upload', 'denied'),
    ]);
    const { byStatus, bytes, files, agents } = tally;
    return {
      from: from.toISOString(),
      to: to.toISOString(),
      transfers: { total: Object.values(byStatus).reduce((n, c) => n + c, 0), by_status: byStatus },
      bytes_moved: bytes,
      files_moved: files,
      uploads,
      downloads,
      blocked_uploads: blocked,
      active_agents: agents.size,
    };
  }

  /**
   * Counts the transfers matching `filter` by status, sums what they moved and collects the agents
   * that ran them, in one pass of a cursor over the projected fields: memory stays constant with
   * the number of transfers (the agents' set is bounded by the account's agents). (An aggregation's
   * `$sum` over a field comes back 0 on FerretDB 1.24, the test database; counting here is exact on both.)
   */
  private async tallyTransfers(filter: Record<string, unknown>) {
    const byStatus = Object.fromEntries(TRANSFER_STATUSES.map((s) => [s, 0])) as Record<TransferStatus, number>;
    const agents = new Set<string>();
    let bytes = 0;
    let files = 0;
    const cursor = this.db.transfers.collection.find(filter, {
      projection: { status: 1, bytes_transferred: 1, files_transferred: 1, agent_id: 1, source_agent_id: 1 },
    });
    try {
      for await (const t of cursor) {
        const status = t.status as TransferStatus;
        if (status in byStatus) byStatus[status]++;
        bytes += Number(t.bytes_transferred ?? 0);
        files += Number(t.files_transferred ?? 0);
        if (t.agent_id) agents.add(String(t.agent_id));
        if (t.source_agent_id) agents.add(String(t.source_agent_id));
      }
    } finally {
      await cursor.close();
    }
    return { byStatus, bytes, files, agents };
  }
}

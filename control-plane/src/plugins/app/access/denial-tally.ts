import type { Actor } from '@xfer/shared';
import type { AuditEntry } from './audit.service.js';

/** One refused request. */
export interface Denial {
  /** The audit action recorded; `auth.denied` unless a route refuses on its own terms (`agent.connect`). */
  action?: string;
  accountId: string | null;
  actor: Actor;
  /** `METHOD /route/pattern` */
  route: string;
  ip: string;
  reason: string;
  status: number;
}

interface Group {
  denial: Denial;
  count: number;
  first: Date;
  last: Date;
}

/** Where groups are written, and the bound on pending groups. */
export interface DenialTallyOptions {
  record: (entry: AuditEntry) => Promise<void>;
  /** A flush starts early once this many groups are pending, so memory stays bounded under a flood. */
  maxGroups: number;
  onError: (err: unknown) => void;
}

/**
 * Refused requests, counted in memory and written to the audit trail as one
 * `auth.denied` record per client address, reason, claimed identity and route per flush, with
 * `details.count`: a flood of bad credentials costs memory bounded by `maxGroups`, never one
 * database write per request (docs/security.md "Audit trail").
 */
export class DenialTally {
  private groups = new Map<string, Group>();

  constructor(private readonly opts: DenialTallyOptions) {}

  add(denial: Denial, now = new Date()): void {
    const id = JSON.stringify([denial.action, denial.ip, denial.reason, denial.accountId, denial.actor.type, denial.actor.id, denial.route, denial.status]);
    const group = this.groups.get(id);
    if (group) {
      group.count++;
      group.last = now;
      return;
    }
    this.groups.set(id, { denial, count: 1, first: now, last: now });
    if (this.groups.size >= this.opts.maxGroups) this.flush().catch(this.opts.onError);
  }

  /** Writes every pending group (one audit record each) and starts counting afresh. */
  async flush(): Promise<void> {
    const groups = this.groups;
    this.groups = new Map();
    for (const { denial, count, first, last } of groups.values()) {
      await this.opts.record({
        accountId: denial.accountId,
        actor: denial.actor,
        action: denial.action ?? 'auth.denied',
        resource: { type: 'route', id: denial.route },
        ip: denial.ip,
        outcome: 'denied',
        details: { reason: denial.reason, status: denial.status, count, first_at: first.toISOString(), last_at: last.toISOString() },
      }).catch(this.opts.onError);
    }
  }
}

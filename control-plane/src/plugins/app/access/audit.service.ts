import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import { Types } from 'mongoose';
import type { Actor } from '@xfer/shared';
import type { ChainWriter } from '../../../lib/audit-chain.js';
import { AppError } from '../../../errors.js';

/** One record of the audit trail, as its writers give it. */
export interface AuditEntry {
  accountId: string | Types.ObjectId | null;
  actor: Actor;
  action: string;
  resource?: { type: string; id: string | null } | null;
  ip?: string | null;
  outcome: 'success' | 'failure' | 'denied';
  /** Never credentials, keys, tokens or passwords: only ids, names and counts. */
  details?: Record<string, unknown>;
}

/** Who makes a change outside a request (an agent's message): what `recordRequest` takes from the request. */
export type AuditContext = Pick<AuditEntry, 'accountId' | 'actor' | 'ip'>;

/** An entry whose account, actor and address come from its request (or context). */
export type RequestAuditEntry = Omit<AuditEntry, 'accountId' | 'actor' | 'ip'> & Partial<AuditEntry>;

/** Writes the record of a change; `apply` calls it after its checks, right before its write. */
export type Announce = (entry: RequestAuditEntry) => Promise<void>;

/** Who an audited action is by: the caller of a request, or a context given outright. */
export type AuditBy = FastifyRequest | AuditContext;

/** What the audit service needs. */
export interface AuditServiceOptions {
  /** The chain records are appended to (lib/audit-chain.ts). */
  chain: Pick<ChainWriter, 'append'>;
  /** Where a record that could not be written is reported. */
  log: Pick<FastifyBaseLogger, 'error'>;
}

/** The audit trail's writer: every record goes through the hash chain (docs/security.md "The audit chain"). */
export class AuditService {
  private readonly chain: AuditServiceOptions['chain'];
  private readonly log: AuditServiceOptions['log'];

  constructor(opts: AuditServiceOptions) {
    this.chain = opts.chain;
    this.log = opts.log;
  }

  async record(entry: AuditEntry): Promise<void> {
    await this.write(entry);
  }

  /** Records an action of the caller of `by` (actor, account and ip taken from the request). */
  recordRequest(by: AuditBy, entry: RequestAuditEntry): Promise<void> {
    return this.record(this.full(by, entry));
  }

  /**
   * A security-relevant change by the caller of `by`, recorded write-ahead (docs/security.md
   * "The audit chain"): `apply` announces the change (the record is written) once its checks
   * pass and before it writes, so no crash can leave a change without its record. When `apply`
   * throws after announcing, a `failure` record of the same action follows, naming the announced
   * record (`details.announced`) and the reason: the change did not happen (or not entirely).
   * A refusal before announcing writes nothing, as before.
   */
  async change<T>(by: AuditBy, apply: (announce: Announce) => Promise<T>): Promise<T> {
    let announced: { entry: AuditEntry; id: unknown } | null = null;
    try {
      return await apply(async (entry) => {
        const full = this.full(by, entry);
        announced = { entry: full, id: (await this.write(full))._id };
      });
    } catch (err) {
      const done = announced as { entry: AuditEntry; id: unknown } | null;
      if (done) {
        await this.write({
          ...done.entry, outcome: 'failure',
          // A client error's message names what went wrong; a server error's may carry internals
          // (a driver message quoting another tenant's value), which the account must not read.
          details: { announced: String(done.id), reason: err instanceof AppError && err.statusCode < 500 ? err.message : 'server error (see the log)' },
        }).catch((auditErr: unknown) => this.log.error({ err: auditErr }, 'audit: the failure of an announced change could not be recorded'));
      }
      throw err;
    }
  }

  /** The whole entry: a context's fields, or the request's caller and address, under `entry`. */
  private full(by: AuditBy, entry: RequestAuditEntry): AuditEntry {
    if ('actor' in by) return { ...by, ...entry };
    return {
      accountId: by.principal?.accountId ?? null,
      actor: by.principal?.actor ?? { type: 'system', id: null },
      ip: by.ip,
      ...entry,
    };
  }

  // Straight to the collection: what is hashed is exactly what is stored (no mongoose casting).
  private write(entry: AuditEntry) {
    return this.chain.append({
      timestamp: new Date(),
      account_id: entry.accountId ? new Types.ObjectId(String(entry.accountId)) : null,
      actor: { type: entry.actor.type, id: entry.actor.id ?? null },
      action: entry.action,
      resource: entry.resource ? { type: entry.resource.type, id: entry.resource.id ?? null } : null,
      ip: entry.ip ?? null,
      outcome: entry.outcome,
      details: entry.details,
    });
  }
}

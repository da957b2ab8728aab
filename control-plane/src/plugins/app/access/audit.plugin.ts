import fp from 'fastify-plugin';
import type { FastifyRequest } from 'fastify';
import { Types } from 'mongoose';
import type { Actor } from '@xfer/shared';
import { ChainWriter } from '../../../lib/audit-chain.js';
import { systemKeyOf } from '../../../lib/system-keys.js';
import { AppError } from '../../../errors.js';

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

export type RequestAuditEntry = Omit<AuditEntry, 'accountId' | 'actor' | 'ip'> & Partial<AuditEntry>;

/** Writes the record of a change; `apply` calls it after its checks, right before its write. */
export type Announce = (entry: RequestAuditEntry) => Promise<void>;

export interface AuditService {
  record(entry: AuditEntry): Promise<void>;
  /** Records an action of the caller of `request` (actor, account and ip taken from it). */
  recordRequest(request: FastifyRequest, entry: RequestAuditEntry): Promise<void>;
  /**
   * A security-relevant change by the caller of `request`, recorded write-ahead (docs/security.md
   * "The audit chain"): `apply` announces the change (the record is written) once its checks
   * pass and before it writes, so no crash can leave a change without its record. When `apply`
   * throws after announcing, a `failure` record of the same action follows, naming the announced
   * record (`details.announced`) and the reason: the change did not happen (or not entirely).
   * A refusal before announcing writes nothing, as before.
   */
  change<T>(by: FastifyRequest | AuditContext, apply: (announce: Announce) => Promise<T>): Promise<T>;
}

declare module 'fastify' {
  interface FastifyInstance {
    audit: AuditService;
  }
}

export default fp(
  async (app) => {
    // Straight to the collection: what is hashed is exactly what is stored (no mongoose casting).
    const chain = new ChainWriter(app.db.auditEvents.collection, await systemKeyOf(app.db, app.vault, 'audit'));
    const write = (entry: AuditEntry) =>
      chain.append({
        timestamp: new Date(),
        account_id: entry.accountId ? new Types.ObjectId(String(entry.accountId)) : null,
        actor: { type: entry.actor.type, id: entry.actor.id ?? null },
        action: entry.action,
        resource: entry.resource ? { type: entry.resource.type, id: entry.resource.id ?? null } : null,
        ip: entry.ip ?? null,
        outcome: entry.outcome,
        details: entry.details,
      });
    const record = async (entry: AuditEntry) => {
      await write(entry);
    };
    const ofRequest = (request: FastifyRequest, entry: RequestAuditEntry): AuditEntry => ({
      accountId: request.principal?.accountId ?? null,
      actor: request.principal?.actor ?? { type: 'system', id: null },
      ip: request.ip,
      ...entry,
    });
    app.decorate<AuditService>('audit', {
      record,
      recordRequest: (request, entry) => record(ofRequest(request, entry)),
      change: async (by, apply) => {
        let announced: { entry: AuditEntry; id: unknown } | null = null;
        try {
          return await apply(async (entry) => {
            const full = 'actor' in by ? { ...by, ...entry } : ofRequest(by, entry);
            announced = { entry: full, id: (await write(full))._id };
          });
        } catch (err) {
          const done = announced as { entry: AuditEntry; id: unknown } | null;
          if (done) {
            await write({
              ...done.entry, outcome: 'failure',
              // A client error's message names what went wrong; a server error's may carry internals
              // (a driver message quoting another tenant's value), which the account must not read.
              details: { announced: String(done.id), reason: err instanceof AppError && err.statusCode < 500 ? err.message : 'server error (see the log)' },
            }).catch((auditErr: unknown) => app.log.error({ err: auditErr }, 'audit: the failure of an announced change could not be recorded'));
          }
          throw err;
        }
      },
    });
  },
  { name: 'audit', dependencies: ['mongoose'] },
);

import fp from 'fastify-plugin';
import type { FastifyRequest } from 'fastify';
import { Types } from 'mongoose';
import type { Actor } from '@xfer/shared';
import { appendToChain } from '../../lib/audit-chain.js';

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

export interface AuditService {
  record(entry: AuditEntry): Promise<void>;
  /** Records an action of the caller of `request` (actor, account and ip taken from it). */
  recordRequest(request: FastifyRequest, entry: Omit<AuditEntry, 'accountId' | 'actor' | 'ip'> & Partial<AuditEntry>): Promise<void>;
}

declare module 'fastify' {
  interface FastifyInstance {
    audit: AuditService;
  }
}

export default fp(
  async (app) => {
    // Straight to the collection: what is hashed is exactly what is stored (no mongoose casting).
    const record = async (entry: AuditEntry) => {
      await appendToChain(app.db.auditEvents.collection, {
        timestamp: new Date(),
        account_id: entry.accountId ? new Types.ObjectId(String(entry.accountId)) : null,
        actor: { type: entry.actor.type, id: entry.actor.id ?? null },
        action: entry.action,
        resource: entry.resource ? { type: entry.resource.type, id: entry.resource.id ?? null } : null,
        ip: entry.ip ?? null,
        outcome: entry.outcome,
        details: entry.details,
      });
    };
    app.decorate<AuditService>('audit', {
      record,
      recordRequest: (request, entry) =>
        record({
          accountId: request.principal?.accountId ?? null,
          actor: request.principal?.actor ?? { type: 'system', id: null },
          ip: request.ip,
          ...entry,
        }),
    });
  },
  { name: 'audit', dependencies: ['mongoose'] },
);

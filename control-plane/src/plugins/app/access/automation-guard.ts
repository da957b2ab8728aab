import type { FastifyRequest } from 'fastify';
import type { AuditService } from './audit.service.js';
import { principalOf } from './auth.plugin.js';
import { requireTransfersWrite } from './grant-rules.js';

/**
 * The routes that set up or run automation (schedules, watchers, workflows) call this before
 * anything else: `requireTransfersWrite` for the request's caller, and a refusal recorded in the
 * audit trail as `denied` (a scope escalation tried) before the 403 goes out.
 */
export async function requireTransfersWriteFor(
  audit: Pick<AuditService, 'recordRequest'>, request: FastifyRequest, what: string, action: string, resource?: { type: string; id: string },
): Promise<void> {
  try {
    requireTransfersWrite(principalOf(request), what);
  } catch (err) {
    await audit.recordRequest(request, { action, outcome: 'denied', ...(resource ? { resource } : {}), details: { reason: 'scope escalation' } });
    throw err;
  }
}

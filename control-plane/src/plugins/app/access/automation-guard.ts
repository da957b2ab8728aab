import { Types } from 'mongoose';
import type { FastifyRequest } from 'fastify';
import { scopesForRole, type AutomationOwner, type Role, type Scope } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { AuditService } from './audit.service.js';
import { principalOf } from './auth.plugin.js';
import type { Principal } from './auth.service.js';
import { requireEventsWithin, requireRunWithin, scopesToRun } from './grant-rules.js';

type Audit = Pick<AuditService, 'recordRequest'>;
type Resource = { type: string; id: string | null };

/** Runs a grant rule for the request's caller; a refusal is recorded as `denied` (a scope escalation tried) before the 403 goes out. */
async function guarded(audit: Audit, request: FastifyRequest, action: string, resource: Resource | undefined, rule: (p: Principal) => void): Promise<void> {
  try {
    rule(principalOf(request));
  } catch (err) {
    await audit.recordRequest(request, { action, outcome: 'denied', ...(resource ? { resource } : {}), details: { reason: 'scope escalation' } });
    throw err;
  }
}

/**
 * The routes that set up, change or run automation (schedules, watchers, workflows) call this
 * before anything else: the caller must hold what running the definition (as it will be after
 * the change) needs (`requireRunWithin`).
 */
export function requireRunAuthorityFor(
  audit: Audit, request: FastifyRequest, what: string, action: string, definition: { runsWorkflow: boolean }, resource?: Resource,
): Promise<void> {
  return guarded(audit, request, action, resource, (p) => requireRunWithin(p, what, definition));
}

/** The routes that save an event subscription (webhooks, notification settings): the caller must hold the read scope of every event type (`requireEventsWithin`). */
export function requireEventsReadableFor(audit: Audit, request: FastifyRequest, events: readonly string[], action: string, resource?: Resource): Promise<void> {
  return guarded(audit, request, action, resource, (p) => requireEventsWithin(p, events));
}

/** A stored owner: the key or user that saved a schedule or watcher. */
export interface StoredOwner {
  type: string;
  id: Types.ObjectId;
}

/** The owner a save by this caller records: its key, or its session's user (a service principal's key is that key). */
export function ownerOf(principal: Principal): StoredOwner {
  return principal.kind === 'api_key'
    ? { type: 'api_key', id: new Types.ObjectId(principal.keyId) }
    : { type: 'user', id: new Types.ObjectId(principal.userId) };
}

/** The read shape of a stored owner. */
export function presentOwner(owner: StoredOwner | null | undefined): AutomationOwner {
  return owner ? { type: owner.type as 'api_key' | 'user', id: String(owner.id) } : null;
}

/**
 * Why the owner of a schedule or watcher may no longer run its definition when it fires, or null
 * when it may (docs/security.md "Escalation rules"): an API key must exist in the account,
 * unrevoked and unexpired, and hold `scopesToRun`; a user must exist in the account and its role
 * hold them. One read by `_id`. The reason names the owner, what it lost and how to take the
 * definition over (`saveRoute`, e.g. `PUT /schedules/<id>`). No owner (saved before owners were
 * recorded): the account's authority, null.
 */
export async function ownerAuthorityProblem(
  db: Models, accountId: Types.ObjectId | string, owner: StoredOwner | null | undefined, definition: { runsWorkflow: boolean }, saveRoute: string, now = new Date(),
): Promise<string | null> {
  if (!owner) return null;
  const needed = scopesToRun(definition);
  let held: readonly Scope[] | null = null;
  let gone: string | null = null;
  const who = owner.type === 'api_key' ? `API key ${String(owner.id)}` : `user ${String(owner.id)}`;
  if (owner.type === 'api_key') {
    const key = await db.apiKeys.collection.findOne<{ account_id: Types.ObjectId; scopes: Scope[]; revoked_at: Date | null; expires_at: Date | null }>(
      { _id: owner.id }, { projection: { account_id: 1, scopes: 1, revoked_at: 1, expires_at: 1 } },
    );
    if (!key || String(key.account_id) !== String(accountId)) gone = 'was deleted';
    else if (key.revoked_at) gone = 'was revoked';
    else if (key.expires_at && key.expires_at <= now) gone = 'expired';
    else held = key.scopes;
  } else {
    const user = await db.users.collection.findOne<{ account_id: Types.ObjectId; role: Role }>({ _id: owner.id }, { projection: { account_id: 1, role: 1 } });
    if (!user || String(user.account_id) !== String(accountId)) gone = 'was deleted';
    else held = scopesForRole(user.role);
  }
  const missing = held ? needed.filter((s) => !held.includes(s)) : needed;
  if (!gone && missing.length === 0) return null;
  const why = gone ?? `no longer holds ${missing.join(', ')}`;
  return `its owner (${who}) ${why}, so it no longer has the authority to run it (it needs ${needed.join(' and ')}); ` +
    `a caller holding that authority takes it over by saving it again (${saveRoute})`;
}

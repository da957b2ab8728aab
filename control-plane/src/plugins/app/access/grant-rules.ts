import { scopesForRole, SCOPES, type Role, type Scope } from '@xfer/shared';
import { ForbiddenError } from '../../../errors.js';
import type { Models } from '../../../models/index.js';
import type { Principal } from './auth.service.js';

/**
 * No escalation through any door (docs/security.md "Escalation rules"): whatever a caller
 * creates, promotes or revokes stays within what the caller itself holds. These are the checks
 * the routes that mint or remove credentials share; each throws a 403 that says why.
 */

/** The scopes of `wanted` the caller does not hold, in the canonical SCOPES order. */
export function scopesBeyond(principal: Principal, wanted: Iterable<string>): Scope[] {
  const set = new Set(wanted);
  return SCOPES.filter((s) => set.has(s) && !principal.scopes.has(s));
}

/** Who made the request, for a 403 message. */
function callerName(principal: Principal): string {
  return principal.kind === 'api_key' ? 'the calling key' : `your role (${principal.role})`;
}

/**
 * A user may be given (created with, promoted to) a role only by a caller holding every scope of
 * that role: a key with only `users:write` cannot make an admin, whose session could mint any key.
 */
export function requireRoleWithin(principal: Principal, role: Role, action: 'create' | 'promote'): void {
  const beyond = scopesBeyond(principal, scopesForRole(role));
  if (beyond.length === 0) return;
  const verb = action === 'create' ? 'create a user with' : 'give a user';
  throw new ForbiddenError(`Cannot ${verb} the role ${role}: it carries scopes ${callerName(principal)} does not hold (${beyond.join(', ')})`);
}

/**
 * A user may be changed (name, password, role) or deleted only by a caller holding every scope
 * of the user's current role: setting an admin's password is becoming that admin.
 */
export function requireUserWithin(principal: Principal, targetRole: Role, action: 'change' | 'delete'): void {
  const beyond = scopesBeyond(principal, scopesForRole(targetRole));
  if (beyond.length === 0) return;
  throw new ForbiddenError(
    `Cannot ${action} a user with the role ${targetRole}: it carries scopes ${callerName(principal)} does not hold (${beyond.join(', ')})`,
  );
}

/** A key may be revoked only by a caller holding every scope of that key (the bootstrap key holds all). */
export function requireKeyWithin(principal: Principal, keyScopes: readonly string[]): void {
  const beyond = scopesBeyond(principal, keyScopes);
  if (beyond.length === 0) return;
  throw new ForbiddenError(`Cannot revoke a key holding scopes ${callerName(principal)} does not hold (${beyond.join(', ')})`);
}

/**
 * When the caller's own authority ends: its key's `expires_at`, read here rather than carried on
 * every request's principal. Null for a key that never expires and for sessions (a session acts
 * for its user, whose authority does not end with the session; docs/security.md says why).
 */
export async function callerExpiresAt(db: Models, principal: Principal): Promise<Date | null> {
  if (principal.kind !== 'api_key' || !principal.keyId) return null;
  const key = await db.apiKeys.findById(principal.keyId, { expires_at: 1 }).lean();
  return key?.expires_at ?? null;
}

const EXPIRY_HINT = {
  key: 'give expires_at or expires_in_days within that', 'share link': 'give expires_in_hours within that', 'data room invite': 'give expires_at within that',
} as const;

/**
 * What an expiring key creates (a key, a share link) expires no later than the key: otherwise a
 * short-lived key could outlive itself by minting a permanent credential.
 */
export function requireExpiryWithin(callerEnd: Date | null, requested: Date | null, what: keyof typeof EXPIRY_HINT): void {
  if (!callerEnd) return;
  if (requested && requested.getTime() <= callerEnd.getTime()) return;
  const asked = requested ? `expires at ${requested.toISOString()}` : 'never expires';
  throw new ForbiddenError(
    `The calling key expires at ${callerEnd.toISOString()}: a ${what} it creates must expire no later ` +
      `(the requested ${what} ${asked}; ${EXPIRY_HINT[what]})`,
  );
}

/**
 * Automation that runs transfers later, as the system (a schedule, a watcher), may be set up or
 * changed only by a caller who may run transfers: a key holding schedules:write or
 * watchers:write alone would otherwise run transfers it may not. The 403 says which thing needs it.
 */
export function requireTransfersWrite(principal: Principal, what: string): void {
  if (principal.scopes.has('transfers:write')) return;
  throw new ForbiddenError(`${what} runs transfers: this needs transfers:write, which ${callerName(principal)} does not hold`);
}

/**
 * An administrator of the account: an owner or admin console session, or an API key holding every
 * scope (the bootstrap key does). Acts that trust something with more than any one scope gives
 * (approving an agent, which then receives connections' credentials: docs/security.md "Agents:
 * approval") are theirs alone.
 */
export function isAdministrator(principal: Principal): boolean {
  if (principal.kind === 'session') return principal.role === 'owner' || principal.role === 'admin';
  return SCOPES.every((s) => principal.scopes.has(s));
}

/** 403 unless the caller is an administrator (`isAdministrator`), saying what needs one and why. */
export function requireAdministrator(principal: Principal, what: string): void {
  if (isAdministrator(principal)) return;
  const who = principal.kind === 'api_key' ? 'the calling key does not hold every scope' : `your role (${principal.role}) is neither owner nor admin`;
  throw new ForbiddenError(`${what} needs an administrator (an owner or admin session, or a key holding every scope): ${who}`);
}

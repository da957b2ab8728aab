import { isWebhookEventType, scopesForRole, SCOPES, type Role, type Scope, type WebhookEventType } from '@xfer/shared';
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
 * What running an automation definition needs, computed from the definition: what running it
 * directly would (docs/security.md "Escalation rules"). Every definition runs transfers
 * (transfers:write); one that runs a workflow also needs workflows:write, which `POST
 * /workflows/:id/run` needs, or a schedule or watcher would run a workflow (its move_source and
 * delete_source steps included) for a caller who may not.
 */
export function scopesToRun(definition: { runsWorkflow: boolean }): Scope[] {
  return definition.runsWorkflow ? ['transfers:write', 'workflows:write'] : ['transfers:write'];
}

/**
 * Automation that runs later (a schedule, a watcher, a workflow) may be set up, changed or run
 * only by a caller holding what running its definition needs (`scopesToRun`): a key holding
 * schedules:write alone would otherwise run transfers, or a workflow, it may not. The 403 names
 * the thing, what it needs and what the caller lacks.
 */
export function requireRunWithin(principal: Principal, what: string, definition: { runsWorkflow: boolean }): void {
  const needed = scopesToRun(definition);
  const beyond = scopesBeyond(principal, needed);
  if (beyond.length === 0) return;
  const missing = beyond.length < needed.length ? ` (missing ${beyond.join(', ')})` : '';
  throw new ForbiddenError(`${what} runs transfers: this needs ${needed.join(' and ')}, which ${callerName(principal)} does not hold${missing}`);
}

/**
 * The read scope each event type needs to be subscribed to (a webhook's `events`, the
 * notification settings' `events`): what the event carries, delivered to a URL or mailbox the
 * subscriber chose, so subscribing is reading it (docs/security.md "Event subscriptions"). One
 * entry per event type: a type added to WEBHOOK_EVENT_TYPES without one does not compile.
 */
export const EVENT_READ_SCOPES: Readonly<Record<WebhookEventType, Scope>> = {
  'file.uploaded': 'files:read', 'file.downloaded': 'files:read', 'file.deleted': 'files:read', 'file.shared': 'files:read',
  'file.scan_blocked': 'files:read',
  'transfer.started': 'transfers:read', 'transfer.completed': 'transfers:read', 'transfer.failed': 'transfers:read',
  'data_room.created': 'data-rooms:read', 'data_room.file_added': 'data-rooms:read', 'data_room.member_added': 'data-rooms:read',
  'user.login': 'users:read', 'user.registered': 'users:read',
  'workflow.notify': 'workflows:read', 'workflow.completed': 'workflows:read', 'workflow.failed': 'workflows:read',
};

/**
 * A subscription (webhook or notifications) may carry only event types whose read scope the
 * caller holds. Unknown types are left to the caller's 400. The 403 names the event types and
 * the missing scopes.
 */
export function requireEventsWithin(principal: Principal, events: readonly string[]): void {
  const refused = events.filter((e) => isWebhookEventType(e) && !principal.scopes.has(EVENT_READ_SCOPES[e]));
  if (refused.length === 0) return;
  const beyond = scopesBeyond(principal, refused.map((e) => EVENT_READ_SCOPES[e as WebhookEventType]));
  throw new ForbiddenError(
    `Subscribing to ${refused.join(', ')} sends what ${refused.length > 1 ? 'they carry' : 'it carries'} to the subscriber: ` +
      `this needs ${beyond.join(', ')}, which ${callerName(principal)} does not hold`,
  );
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

/**
 * The access domain: who is calling (auth), how often (rate limits), what they may grant (grant
 * rules) and what they did (audit). Routes and other domains import it through this file only.
 */
export { principalOf, type RouteAccess } from './auth.plugin.js';
export type { AuthService, Principal, SessionClaims } from './auth.service.js';
export type { Announce, AuditBy, AuditContext, AuditEntry, AuditService, RequestAuditEntry } from './audit.service.js';
export type { RateLimitOptions, RateLimitService } from './rate-limit.service.js';
export {
  callerExpiresAt, requireExpiryWithin, requireKeyWithin, requireRoleWithin, requireUserWithin, scopesBeyond,
} from './grant-rules.js';

/**
 * The access domain: who is calling (auth), how often (rate limits), what they may grant (grant
 * rules) and what they did (audit). Routes and other domains import it through this file only.
 */
export { principalOf, type Principal, type RouteAccess, type SessionClaims } from './auth.plugin.js';
export type { Announce, AuditContext, AuditEntry, AuditService, RequestAuditEntry } from './audit.plugin.js';
export type { RateLimiter, RateLimitOptions } from './rate-limit.plugin.js';
export {
  callerExpiresAt, requireExpiryWithin, requireKeyWithin, requireRoleWithin, requireUserWithin, scopesBeyond,
} from './grant-rules.js';

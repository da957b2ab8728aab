import fp from 'fastify-plugin';
import auditPlugin from './audit.plugin.js';
import rateLimitPlugin from './rate-limit.plugin.js';
import authPlugin from './auth.plugin.js';
import { ApiKeysService } from './api-keys.service.js';
import { UsersService } from './users.service.js';
import { SettingsService } from './settings.service.js';
import { MfaService } from './mfa.service.js';
import { LoginLockoutService } from './login-lockout.service.js';
import { LoginService } from './login.service.js';
import { OutboxService } from '../webhooks/index.js';

/**
 * The access domain: who is calling (auth), how often (rate limits), what they may grant (grant
 * rules), what they did (audit), and the accounts' credentials (users, API keys, MFA, sign-in,
 * settings). Routes and other domains import it through this file only.
 */
export { consoleUserOf, principalOf, type RouteAccess } from './auth.plugin.js';
export type { AuthService, ConsoleUser, Principal, SessionClaims } from './auth.service.js';
export type { Announce, AuditBy, AuditContext, AuditEntry, AuditService, RequestAuditEntry } from './audit.service.js';
export type { RateLimitOptions, RateLimitService } from './rate-limit.service.js';
export {
  callerExpiresAt, EVENT_READ_SCOPES, isAdministrator, requireAdministrator, requireEventsWithin, requireExpiryWithin, requireKeyWithin,
  requireRoleWithin, requireRunWithin, requireUserWithin, scopesBeyond, scopesToRun,
} from './grant-rules.js';
export {
  ownerAuthorityProblem, ownerOf, presentOwner, requireEventsReadableFor, requireRunAuthorityFor, type StoredOwner,
} from './automation-guard.js';
export type { ApiKeysService } from './api-keys.service.js';
export type { UsersService } from './users.service.js';
export type { SettingsService, StoredSetting } from './settings.service.js';
export type { MfaService } from './mfa.service.js';
export type { LoginService } from './login.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    apiKeys: ApiKeysService;
    users: UsersService;
    settings: SettingsService;
    mfa: MfaService;
    login: LoginService;
  }
}

/**
 * Registers the audit trail, the rate limits and authentication (each its own plugin, in the
 * order their hooks need), then decorates the account services, which act through the audit trail.
 */
export default fp(
  async (app) => {
    const { config, db, vault } = app;
    await app.register(auditPlugin);
    await app.register(rateLimitPlugin, { perMinute: config.rateLimitPerMinute, syncMs: config.rateLimitSyncMs });
    await app.register(authPlugin);
    const { audit } = app;
    const mfa = new MfaService({ db, vault, audit });
    // The outbox is stateless over the database: the same one the webhooks domain decorates
    // later (`app.outbox`), built here because access is registered first.
    const outbox = new OutboxService({ db });
    app.decorate('apiKeys', new ApiKeysService({ db, audit }));
    app.decorate('users', new UsersService({ db, audit, outbox }));
    app.decorate('settings', new SettingsService({ db, audit }));
    app.decorate('mfa', mfa);
    app.decorate('login', new LoginService({
      db, audit, mfa, outbox,
      lockout: new LoginLockoutService({ db, config: config.loginLockout }),
      signSession: (claims) => app.jwt.sign(claims),
      sessionTtlSeconds: config.sessionTtlSeconds,
    }));
  },
  { name: 'access', dependencies: ['mongoose', '@fastify/jwt'] },
);

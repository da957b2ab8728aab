import fp from 'fastify-plugin';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Messages, planHasTeamFeatures, type Scope } from '@xfer/shared';
import { ForbiddenError, UnauthorizedError } from '../../../errors.js';
import { AuthService, type AuthDenied, type ConsoleUser, type Principal, type SessionClaims } from './auth.service.js';
import { DenialTally } from './denial-tally.js';

/** What a route needs from its caller; every route under /api/v1 must declare it. */
export interface RouteAccess {
  /** Scope an API key must hold, and a session's role must allow. */
  scope?: Scope;
  /** No authentication (health, login, share-link downloads). */
  public?: true;
  /** Console sessions only: an API key gets 403. */
  consoleOnly?: true;
  /** Team plan or higher (API keys, webhooks). */
  teamPlan?: true;
  /** Not counted against the rate limit (health checks from load balancers). */
  unlimited?: true;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    access?: RouteAccess;
  }
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyInstance {
    /** Every API route and what it needs: used by tests and by the CLI coverage check. */
    apiRoutes: Array<{ method: string; url: string; access: RouteAccess }>;
    /** Refused requests waiting to be written to the audit trail (flushed every minute and on close). */
    authDenials: Pick<DenialTally, 'add' | 'flush'>;
    /** Authentication of bearer credentials (auth.service.ts). */
    auth: AuthService;
  }
}

declare module '@fastify/jwt' {
  interface FastifyJWT {
    payload: SessionClaims;
  }
}

const API_PREFIX = '/api/v1';
const DENIAL_FLUSH_MS = 60_000;

/**
 * Authentication (API key or session), then the rate limit, then authorization, in one
 * onRequest hook so that every request is counted and nothing reads a body it may not send.
 */
export default fp(
  async (app) => {
    app.decorateRequest('principal', null);
    app.decorate('apiRoutes', []);

    app.addHook('onRoute', (route) => {
      if (!route.url.startsWith(API_PREFIX)) return;
      const access = route.config?.access;
      if (!access || !(access.public || access.scope || access.consoleOnly)) {
        throw new Error(`Route ${String(route.method)} ${route.url} declares no access (config.access)`);
      }
      for (const method of [route.method].flat()) {
        if (method !== 'HEAD') app.apiRoutes.push({ method, url: route.url, access });
      }
    });

    const auth = new AuthService({ db: app.db, verifySession: (token) => app.jwt.verify<SessionClaims>(token), log: app.log });
    app.decorate('auth', auth);

    const tally = new DenialTally({
      record: (entry) => app.audit.record(entry),
      maxGroups: 10_000,
      onError: (err) => app.log.warn({ err }, 'could not record auth denials'),
    });
    app.decorate('authDenials', tally);
    const flusher = setInterval(() => void tally.flush(), DENIAL_FLUSH_MS);
    flusher.unref();
    app.addHook('onClose', async () => {
      clearInterval(flusher);
      await tally.flush();
    });

    /**
     * Denials are counted and written to the audit trail once per interval (denial-tally.ts):
     * a refused request, read or not, authenticated or not, writes nothing itself.
     */
    async function deny(request: FastifyRequest, error: UnauthorizedError | ForbiddenError, denied: AuthDenied) {
      tally.add({ ...denied, route: `${request.method} ${request.routeOptions.url ?? request.url}`, ip: request.ip, status: error.statusCode });
      throw error;
    }

    app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      const access = request.routeOptions.config?.access;
      if (!access || access.public) {
        if (!access?.unlimited) await app.rateLimiter.consume(`ip:${request.ip}`, reply);
        return;
      }
      const result = await auth.authenticate(request.headers.authorization);
      const principal = 'principal' in result ? result.principal : null;
      if (!access.unlimited) await app.rateLimiter.consume(principal ? `account:${principal.accountId}` : `ip:${request.ip}`, reply);
      if (!principal) return deny(request, new UnauthorizedError(Messages.unauthenticated), (result as { denied: AuthDenied }).denied);
      request.principal = principal;
      const denied = { actor: principal.actor, accountId: principal.accountId };
      if (access.consoleOnly && principal.kind === 'api_key') {
        return deny(request, new ForbiddenError(Messages.consoleOnly), { ...denied, reason: 'console-only route' });
      }
      if (access.scope && !principal.scopes.has(access.scope)) {
        const message = principal.kind === 'api_key'
          ? Messages.missingScope
          : `Your role (${principal.role}) does not allow this action (needs ${access.scope})`;
        return deny(request, new ForbiddenError(message), { ...denied, reason: `missing scope ${access.scope}` });
      }
      if (access.teamPlan && !planHasTeamFeatures(principal.plan)) {
        return deny(request, new ForbiddenError(Messages.planRequired), { ...denied, reason: `plan ${principal.plan}` });
      }
    });
  },
  { name: 'auth', dependencies: ['mongoose', 'audit', 'rate-limit', '@fastify/jwt'] },
);

/** The caller of a route that declared access: always set there (the hook refused otherwise). */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new UnauthorizedError(Messages.unauthenticated);
  return request.principal;
}

/** The signed-in console user of a consoleOnly route (such routes never see an API key). */
export function consoleUserOf(request: FastifyRequest): ConsoleUser {
  const principal = principalOf(request);
  if (principal.kind !== 'session' || !principal.userId || !principal.role) throw new UnauthorizedError(Messages.unauthenticated);
  return { accountId: principal.accountId, userId: principal.userId, role: principal.role };
}

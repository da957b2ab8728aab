import fp from 'fastify-plugin';
import type { Types } from 'mongoose';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Messages, planHasTeamFeatures, scopesForRole, type Actor, type Plan, type Role, type Scope } from '@xfer/shared';
import { ForbiddenError, UnauthorizedError } from '../../../errors.js';
import { sha256Hex } from '../../../lib/crypto.js';
import { toObjectId } from '../../../lib/pagination.js';
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

/** The authenticated caller of a request. */
export interface Principal {
  kind: 'api_key' | 'session';
  accountId: string;
  plan: Plan;
  scopes: ReadonlySet<Scope>;
  actor: Actor;
  keyId?: string;
  userId?: string;
  role?: Role;
}

/** Claims of a session token. `iat_ms` gives revocation (sessions_valid_after) millisecond precision. */
export interface SessionClaims {
  sub: string;
  acc: string;
  iat_ms: number;
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
  }
}

declare module '@fastify/jwt' {
  interface FastifyJWT {
    payload: SessionClaims;
  }
}

/** What authentication reads of an API key. */
interface KeyFields {
  _id: Types.ObjectId;
  account_id: Types.ObjectId;
  scopes: string[];
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

type AuthResult = { principal: Principal } | { denied: { actor: Actor; accountId: string | null; reason: string } };

const API_PREFIX = '/api/v1';
const MAX_TOKEN_LENGTH = 4096;
const LAST_USED_GRANULARITY_MS = 60_000;
/**
 * How long an account's plan is reused without reading it again. Nothing in the API changes a
 * plan or deletes an account (only `xfer-server bootstrap` writes accounts), so this bounds how
 * long a plan changed by hand in the database takes to apply (docs/security.md "Authentication").
 * Keys, users, roles and revocations are never cached.
 */
const ACCOUNT_CACHE_MS = 60_000;
const DENIAL_FLUSH_MS = 60_000;
/**
 * How long a refused key (unknown, revoked, expired) is refused again without a read. All three
 * are final: keys are 256 random bits made by the server, so a hash unknown now only becomes
 * known by that very key being generated; revocation and expiry are never undone. The bound only
 * covers a row restored from a backup.
 */
const REFUSED_KEY_CACHE_MS = 60_000;
/** Bounds on the per-instance maps below (entries, then the map starts afresh). */
const MAX_CACHED = 100_000;

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

    const plans = new Map<string, { plan: Plan; until: number }>();
    /** The account's plan (null: the account is gone), read at most once per ACCOUNT_CACHE_MS. */
    async function accountPlan(accountId: string, now: number): Promise<Plan | null> {
      const cached = plans.get(accountId);
      if (cached && cached.until > now) return cached.plan;
      const account = await app.db.accounts.findById(accountId, { plan: 1 }).lean();
      if (!account) return null;
      if (plans.size >= MAX_CACHED) plans.clear();
      plans.set(accountId, { plan: account.plan as Plan, until: now + ACCOUNT_CACHE_MS });
      return account.plan as Plan;
    }

    /** When this instance last updated a key's last_used_at: requests racing past a stale value send one update, not one each. */
    const touched = new Map<string, number>();

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

    /** Hashes of keys refused for a final reason, with the denial to repeat: a client retrying a dead key costs no read. */
    const refusedKeys = new Map<string, { denied: AuthResult; until: number }>();

    async function apiKeyPrincipal(token: string): Promise<AuthResult> {
      const keyHash = sha256Hex(token);
      const now = new Date();
      const refused = refusedKeys.get(keyHash);
      if (refused && refused.until > now.getTime()) return refused.denied;
      // The driver's collection, not a mongoose query: this read is on every request, and a
      // query's casting and captured stack cost more than the read's own work in the process.
      const key = await app.db.apiKeys.collection.findOne<KeyFields>(
        { key_hash: keyHash },
        { projection: { account_id: 1, scopes: 1, expires_at: 1, revoked_at: 1, last_used_at: 1 } },
      );
      const denied = (reason: string): AuthResult => ({
        denied: { actor: { type: 'api_key', id: key ? String(key._id) : null }, accountId: key ? String(key.account_id) : null, reason },
      });
      const final = (reason: string): AuthResult => {
        if (refusedKeys.size >= MAX_CACHED) refusedKeys.clear();
        const result = denied(reason);
        refusedKeys.set(keyHash, { denied: result, until: now.getTime() + REFUSED_KEY_CACHE_MS });
        return result;
      };
      if (!key) return final('unknown key');
      if (key.revoked_at) return final('revoked key');
      if (key.expires_at && key.expires_at <= now) return final('expired key');
      const plan = await accountPlan(String(key.account_id), now.getTime());
      if (!plan) return denied('account gone');
      const keyId = String(key._id);
      const lastUsed = Math.max(key.last_used_at?.getTime() ?? 0, touched.get(keyId) ?? 0);
      if (now.getTime() - lastUsed > LAST_USED_GRANULARITY_MS) {
        if (touched.size >= MAX_CACHED) touched.clear();
        touched.set(keyId, now.getTime());
        const stale = new Date(now.getTime() - LAST_USED_GRANULARITY_MS);
        app.db.apiKeys
          .updateOne({ _id: key._id, $or: [{ last_used_at: null }, { last_used_at: { $lt: stale } }] }, { $set: { last_used_at: now } })
          .catch((err: unknown) => app.log.warn({ err }, 'could not update last_used_at'));
      }
      return {
        principal: {
          kind: 'api_key',
          accountId: String(key.account_id),
          plan,
          scopes: new Set(key.scopes as Scope[]),
          actor: { type: 'api_key', id: keyId },
          keyId,
        },
      };
    }

    async function sessionPrincipal(token: string): Promise<AuthResult> {
      let claims: SessionClaims;
      try {
        claims = app.jwt.verify<SessionClaims>(token);
      } catch {
        return { denied: { actor: { type: 'user', id: null }, accountId: null, reason: 'invalid session token' } };
      }
      const userId = toObjectId(String(claims.sub));
      const user = userId ? await app.db.users.findById(userId).lean() : null;
      const denied = (reason: string): AuthResult => ({ denied: { actor: { type: 'user', id: String(claims.sub) }, accountId: user ? String(user.account_id) : null, reason } });
      if (!user || String(user.account_id) !== claims.acc) return denied('user gone');
      if (typeof claims.iat_ms !== 'number' || claims.iat_ms < user.sessions_valid_after.getTime()) return denied('session revoked');
      const plan = await accountPlan(String(user.account_id), Date.now());
      if (!plan) return denied('account gone');
      const role = user.role as Role;
      return {
        principal: {
          kind: 'session',
          accountId: String(user.account_id),
          plan,
          scopes: new Set(scopesForRole(role)),
          actor: { type: 'user', id: String(user._id) },
          userId: String(user._id),
          role,
        },
      };
    }

    async function authenticate(request: FastifyRequest): Promise<AuthResult> {
      const header = request.headers.authorization;
      const match = header ? /^Bearer +(\S+)$/i.exec(header) : null;
      const token = match?.[1];
      if (!token || token.length > MAX_TOKEN_LENGTH) {
        return { denied: { actor: { type: 'system', id: null }, accountId: null, reason: header ? 'malformed authorization header' : 'no credentials' } };
      }
      return token.startsWith('svc_') ? apiKeyPrincipal(token) : sessionPrincipal(token);
    }

    /**
     * Denials are counted and written to the audit trail once per interval (lib/denial-tally.ts):
     * a refused request, read or not, authenticated or not, writes nothing itself.
     */
    async function deny(request: FastifyRequest, error: UnauthorizedError | ForbiddenError, denied: { actor: Actor; accountId: string | null; reason: string }) {
      tally.add({ ...denied, route: `${request.method} ${request.routeOptions.url ?? request.url}`, ip: request.ip, status: error.statusCode });
      throw error;
    }

    app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
      const access = request.routeOptions.config?.access;
      if (!access || access.public) {
        if (!access?.unlimited) await app.rateLimiter.consume(`ip:${request.ip}`, reply);
        return;
      }
      const result = await authenticate(request);
      const principal = 'principal' in result ? result.principal : null;
      if (!access.unlimited) await app.rateLimiter.consume(principal ? `account:${principal.accountId}` : `ip:${request.ip}`, reply);
      if (!principal) return deny(request, new UnauthorizedError(Messages.unauthenticated), (result as Extract<AuthResult, { denied: unknown }>).denied);
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

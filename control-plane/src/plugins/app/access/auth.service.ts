import { Types } from 'mongoose';
import type { FastifyBaseLogger } from 'fastify';
import { scopesForRole, type Actor, type Plan, type Role, type Scope } from '@xfer/shared';
import { sha256Hex } from '../../../lib/crypto.js';
import { toObjectId } from '../../../lib/pagination.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';
import type { Models } from '../../../models/index.js';

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

/** The signed-in user of a console session (what a consoleOnly route acts for). */
export interface ConsoleUser {
  accountId: string;
  userId: string;
  role: Role;
}

/** Claims of a session token. `iat_ms` gives revocation (sessions_valid_after) millisecond precision. */
export interface SessionClaims {
  sub: string;
  acc: string;
  iat_ms: number;
}

/** Who a refused caller claimed to be, and why it was refused (for the denial tally). */
export interface AuthDenied {
  actor: Actor;
  accountId: string | null;
  reason: string;
}

/** The outcome of authenticating a request: its principal, or why not. */
export type AuthResult = { principal: Principal } | { denied: AuthDenied };

/** What authentication reads of an API key. */
interface KeyFields {
  _id: Types.ObjectId;
  account_id: Types.ObjectId;
  scopes: string[];
  expires_at: Date | null;
  revoked_at: Date | null;
  service_principal?: string | null;
}

/** What authentication needs: keys and users to read, and the session token verifier. */
export interface AuthServiceOptions {
  db: Models;
  /** Verifies a session token's signature and expiry, and returns its claims (throws otherwise). */
  verifySession: (token: string) => SessionClaims;
  log: FastifyBaseLogger;
}

const MAX_TOKEN_LENGTH = 4096;
const LAST_USED_GRANULARITY_MS = 60_000;
/**
 * How long a refused key (unknown, revoked, expired) is refused again without a read. All three
 * are final: keys are 256 random bits made by the server, so a hash unknown now only becomes
 * known by that very key being generated; revocation and expiry are never undone. The bound only
 * covers a row restored from a backup.
 */
const REFUSED_KEY_CACHE_MS = 60_000;
/** Bounds on the per-instance maps below (entries, then the map starts afresh). */
const MAX_CACHED = 100_000;

/** Turns a request's bearer credential (an API key or a console session) into its principal. */
export class AuthService {
  private readonly db: Models;
  private readonly verifySession: AuthServiceOptions['verifySession'];
  private readonly log: FastifyBaseLogger;
  /** When this instance last updated a key's last_used_at: requests racing past a stale value send one update, not one each. */
  private readonly touched = new Map<string, number>();
  /** Hashes of keys refused for a final reason, with the denial to repeat: a client retrying a dead key costs no read. */
  private readonly refusedKeys = new Map<string, { denied: AuthResult; until: number }>();

  constructor(opts: AuthServiceOptions) {
    this.db = opts.db;
    this.verifySession = opts.verifySession;
    this.log = opts.log;
  }

  /** Authenticates the `Authorization` header of a request (absent: `no credentials`). */
  async authenticate(header: string | undefined): Promise<AuthResult> {
    const match = header ? /^Bearer +(\S+)$/i.exec(header) : null;
    const token = match?.[1];
    if (!token || token.length > MAX_TOKEN_LENGTH) {
      return { denied: { actor: { type: 'system', id: null }, accountId: null, reason: header ? 'malformed authorization header' : 'no credentials' } };
    }
    return token.startsWith('svc_') ? this.apiKeyPrincipal(token) : this.sessionPrincipal(token);
  }

  /**
   * The account's plan (null: the account is gone), read on every request, like keys, users and
   * revocations: an owner's plan change (PUT /settings/plan) applies from the next request on every
   * instance. A read by `_id`, the one read FerretDB serves from an index.
   */
  private async accountPlan(accountId: string): Promise<Plan | null> {
    const account = await this.db.accounts.collection.findOne<{ plan: Plan }>({ _id: new Types.ObjectId(accountId) }, { projection: { plan: 1 } });
    return account ? account.plan : null;
  }

  private async apiKeyPrincipal(token: string): Promise<AuthResult> {
    const keyHash = sha256Hex(token);
    const now = new Date();
    const refused = this.refusedKeys.get(keyHash);
    if (refused && refused.until > now.getTime()) return refused.denied;
    // The driver's collection, not a mongoose query: this read is on every request, and a
    // query's casting and captured stack cost more than the read's own work in the process.
    const key = await this.db.apiKeys.collection.findOne<KeyFields>(
      { key_hash: keyHash },
      { projection: { account_id: 1, scopes: 1, expires_at: 1, revoked_at: 1, service_principal: 1 } },
    );
    const denied = (reason: string): AuthResult => ({
      denied: { actor: { type: 'api_key', id: key ? String(key._id) : null }, accountId: key ? String(key.account_id) : null, reason },
    });
    const final = (reason: string): AuthResult => {
      if (this.refusedKeys.size >= MAX_CACHED) this.refusedKeys.clear();
      const result = denied(reason);
      this.refusedKeys.set(keyHash, { denied: result, until: now.getTime() + REFUSED_KEY_CACHE_MS });
      return result;
    };
    if (!key) return final('unknown key');
    if (key.revoked_at) return final('revoked key');
    if (key.expires_at && key.expires_at <= now) return final('expired key');
    const plan = await this.accountPlan(String(key.account_id));
    if (!plan) return denied('account gone');
    const keyId = String(key._id);
    this.touch(key, now);
    return {
      principal: {
        kind: 'api_key',
        accountId: String(key.account_id),
        plan,
        scopes: new Set(key.scopes as Scope[]),
        // A key issued for a service principal acts as that principal in the audit trail.
        actor: key.service_principal ? { type: 'service_principal', id: key.service_principal } : { type: 'api_key', id: keyId },
        keyId,
      },
    };
  }

  /**
   * Records the key's last use, at most once per LAST_USED_GRANULARITY_MS per instance, off the
   * request, in `last_uses`: never in the key's own document, which a revocation writes
   * (last-use.model.ts says why). Two instances' first uses may race to insert: the loser's
   * duplicate key is that same use, already recorded.
   */
  private touch(key: KeyFields, now: Date): void {
    const keyId = String(key._id);
    if (now.getTime() - (this.touched.get(keyId) ?? 0) <= LAST_USED_GRANULARITY_MS) return;
    if (this.touched.size >= MAX_CACHED) this.touched.clear();
    this.touched.set(keyId, now.getTime());
    this.db.lastUses.collection
      .updateOne({ _id: key._id }, { $set: { account_id: key.account_id, kind: 'api_key', at: now } }, { upsert: true })
      .catch((err: unknown) => { if (!isDuplicateKey(err)) this.log.warn({ err }, 'could not update last_used_at'); });
  }

  private async sessionPrincipal(token: string): Promise<AuthResult> {
    let claims: SessionClaims;
    try {
      claims = this.verifySession(token);
    } catch {
      return { denied: { actor: { type: 'user', id: null }, accountId: null, reason: 'invalid session token' } };
    }
    const userId = toObjectId(String(claims.sub));
    const user = userId ? await this.db.users.findById(userId).lean() : null;
    const denied = (reason: string): AuthResult => ({ denied: { actor: { type: 'user', id: String(claims.sub) }, accountId: user ? String(user.account_id) : null, reason } });
    if (!user || String(user.account_id) !== claims.acc) return denied('user gone');
    if (typeof claims.iat_ms !== 'number' || claims.iat_ms < user.sessions_valid_after.getTime()) return denied('session revoked');
    const plan = await this.accountPlan(String(user.account_id));
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
}

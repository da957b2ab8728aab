import { LoginMessages, Messages, type LoginRequest, type Session } from '@xfer/shared';
import { UnauthorizedError } from '../../../errors.js';
import { verifyPassword } from '../../../lib/crypto.js';
import type { Models } from '../../../models/index.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';
import type { Outbox } from '../webhooks/index.js';
import type { AuditService } from './audit.service.js';
import type { SessionClaims } from './auth.service.js';
import { lockedError, LoginLockoutService, type Lock } from './login-lockout.service.js';
import { MfaService } from './mfa.service.js';

/** What the sign-in service needs: the lockout and MFA services it consults, and how to sign a session. */
export interface LoginServiceOptions {
  db: Models;
  audit: AuditService;
  /** Where `user.login` is emitted. */
  outbox: Outbox;
  lockout: LoginLockoutService;
  mfa: MfaService;
  /** Signs a session token (the app's JWT key; docs/security.md "Key rotation"). */
  signSession: (claims: SessionClaims) => string;
  sessionTtlSeconds: number;
}

/**
 * Console sign-in: email + password (+ `otp` once the user has MFA on) → a session token. Every
 * outcome writes an `auth.login` record; failures name the reason, never the password, code or
 * secret. Repeated failures lock the email and the client address for a growing time
 * (login-lockout.service.ts). A successful sign-in emits `user.login` (docs/api.md "Events outbox").
 */
export class LoginService {
  private readonly db: Models;
  private readonly audit: AuditService;
  private readonly outbox: Outbox;
  private readonly lockout: LoginLockoutService;
  private readonly mfa: MfaService;
  private readonly signSession: LoginServiceOptions['signSession'];
  private readonly sessionTtlSeconds: number;

  constructor(opts: LoginServiceOptions) {
    this.db = opts.db;
    this.audit = opts.audit;
    this.outbox = opts.outbox;
    this.lockout = opts.lockout;
    this.mfa = opts.mfa;
    this.signSession = opts.signSession;
    this.sessionTtlSeconds = opts.sessionTtlSeconds;
  }

  /** Signs in from client address `ip`: the session, or 401 (wrong credentials, code required) or 429 (locked). */
  async signIn(body: LoginRequest, ip: string): Promise<Session> {
    const email = body.email.trim().toLowerCase();
    const keys = LoginLockoutService.keys(email, ip);
    const user = await this.db.users.findOne({ email }).lean();
    const audit = (outcome: 'failure' | 'denied', details: Record<string, unknown>) => this.audit.record({
      accountId: user?.account_id ?? null,
      actor: { type: 'user', id: user ? String(user._id) : null },
      action: 'auth.login',
      ip,
      outcome,
      details,
    });
    const refuse = async (reason: string, message: string = Messages.unauthenticated): Promise<never> => {
      // Tell the audit trail when this failure starts (or lengthens) a lock.
      const lock = await this.lockout.lockOf(keys);
      await audit('failure', { reason, ...(lock ? { locked_on: lock.on, locked_for_s: lock.retryAfterSeconds } : {}) });
      throw new UnauthorizedError(message);
    };
    const locked = async (lock: Lock): Promise<never> => {
      await audit('denied', { reason: 'locked out', locked_on: lock.on, retry_after_s: lock.retryAfterSeconds });
      throw lockedError(lock);
    };

    // A locked email or address is refused before any password work (cheap, and the same for
    // unknown emails); then the attempt is counted and checked again (login-lockout.service.ts).
    const before = await this.lockout.lockOf(keys);
    if (before) return locked(before);
    const attempt = await this.lockout.begin(keys);
    if (attempt.lock) return locked(attempt.lock);

    // verifyPassword does the same work when the user does not exist: timing reveals nothing.
    const ok = await verifyPassword(body.password, user?.password_hash ?? null);
    if (!user || !ok) return refuse(user ? 'wrong password' : 'unknown email');

    // The second factor is looked at only after a correct password, so the distinct "code
    // required" answer tells only someone who already has the password that MFA is on, which
    // the console needs to know to ask for the code and which gets that caller no closer to a
    // session. A wrong password answers the same whether MFA is on or not.
    const usesMfa = MfaService.isEnabled(user);
    if (usesMfa) {
      const otp = body.otp;
      if (!otp) {
        // The console's first step, not a guess: it does not count towards a lock.
        await this.lockout.forget(attempt.ids);
        return refuse('otp required', LoginMessages.otpRequired);
      }
      const check = await this.mfa.checkLoginCode(user, otp);
      if (check !== 'ok') return refuse(check);
    }

    await this.lockout.succeeded(keys, attempt.ids);
    const now = new Date();
    const token = this.signSession({ sub: String(user._id), acc: String(user.account_id), iat_ms: now.getTime() });
    // In last_uses, never the user's document: a sign-in must not write back an older role,
    // password or session cut-off over a change made meanwhile (last-use.model.ts).
    await this.db.lastUses.collection.updateOne({ _id: user._id }, { $set: { account_id: user.account_id, kind: 'user', at: now } }, { upsert: true })
      .catch((err: unknown) => { if (!isDuplicateKey(err)) throw err; });
    await this.audit.record({
      accountId: user.account_id,
      actor: { type: 'user', id: String(user._id) },
      action: 'auth.login',
      ip,
      outcome: 'success',
      ...(usesMfa ? { details: { mfa: true } } : {}),
    });
    await this.outbox.emit(user.account_id, 'user.login', { id: String(user._id), email: user.email, ip, mfa: usesMfa });
    const expiresAt = new Date(now.getTime() + this.sessionTtlSeconds * 1000);
    return { token, expires_at: expiresAt.toISOString() };
  }
}

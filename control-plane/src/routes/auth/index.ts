import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Envelope, LoginMessages, LoginRequest, Messages, Session } from '@xfer/shared';
import { UnauthorizedError } from '../../errors.js';
import { verifyPassword } from '../../lib/crypto.js';
import type { SessionClaims } from '../../plugins/app/access/index.js';
import { MfaService } from '../../plugins/app/access/mfa.service.js';
import { lockedError, LoginLockout, type Lock } from '../../plugins/app/access/login-lockout.service.js';

/**
 * POST /auth/login: email + password (+ `otp` once the user has MFA on) → a JWT session for the
 * console. Every outcome writes an `auth.login` record; failures name the reason, never the
 * password, code or secret. Repeated failures lock the email and the client address for a
 * growing time (429 + Retry-After; login-lockout.service.ts).
 */
const auth: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const mfa = new MfaService(app.db, app.vault);
  const lockout = new LoginLockout(app.db, app.config.loginLockout);

  app.post('/auth/login', { schema: { body: LoginRequest, response: { 200: Envelope(Session) } }, config: { access: { public: true } } }, async (request, reply) => {
    const email = request.body.email.trim().toLowerCase();
    const keys = LoginLockout.keys(email, request.ip);
    const user = await app.db.users.findOne({ email }).lean();
    const audit = (outcome: 'failure' | 'denied', details: Record<string, unknown>) => app.audit.record({
      accountId: user?.account_id ?? null,
      actor: { type: 'user', id: user ? String(user._id) : null },
      action: 'auth.login',
      ip: request.ip,
      outcome,
      details,
    });
    const refuse = async (reason: string, message: string = Messages.unauthenticated): Promise<never> => {
      // Tell the audit trail when this failure starts (or lengthens) a lock.
      const lock = await lockout.lockOf(keys);
      await audit('failure', { reason, ...(lock ? { locked_on: lock.on, locked_for_s: lock.retryAfterSeconds } : {}) });
      throw new UnauthorizedError(message);
    };
    const locked = async (lock: Lock): Promise<never> => {
      await audit('denied', { reason: 'locked out', locked_on: lock.on, retry_after_s: lock.retryAfterSeconds });
      throw lockedError(lock);
    };

    // A locked email or address is refused before any password work (cheap, and the same for
    // unknown emails); then the attempt is counted and checked again (login-lockout.service.ts).
    const before = await lockout.lockOf(keys);
    if (before) return locked(before);
    const attempt = await lockout.begin(keys);
    if (attempt.lock) return locked(attempt.lock);

    // verifyPassword does the same work when the user does not exist: timing reveals nothing.
    const ok = await verifyPassword(request.body.password, user?.password_hash ?? null);
    if (!user || !ok) return refuse(user ? 'wrong password' : 'unknown email');

    // The second factor is looked at only after a correct password, so the distinct "code
    // required" answer tells only someone who already has the password that MFA is on, which
    // the console needs to know to ask for the code and which gets that caller no closer to a
    // session. A wrong password answers the same whether MFA is on or not.
    const usesMfa = MfaService.isEnabled(user);
    if (usesMfa) {
      const otp = request.body.otp;
      if (!otp) {
        // The console's first step, not a guess: it does not count towards a lock.
        await lockout.forget(attempt.ids);
        return refuse('otp required', LoginMessages.otpRequired);
      }
      const check = await mfa.checkLoginCode(user, otp);
      if (check !== 'ok') return refuse(check);
    }

    await lockout.succeeded(keys, attempt.ids);
    const now = new Date();
    const claims: SessionClaims = { sub: String(user._id), acc: String(user.account_id), iat_ms: now.getTime() };
    const token = app.jwt.sign(claims);
    await app.db.users.updateOne({ _id: user._id }, { $set: { last_login_at: now } });
    await app.audit.record({
      accountId: user.account_id,
      actor: { type: 'user', id: String(user._id) },
      action: 'auth.login',
      ip: request.ip,
      outcome: 'success',
      ...(usesMfa ? { details: { mfa: true } } : {}),
    });
    const expiresAt = new Date(now.getTime() + app.config.sessionTtlSeconds * 1000);
    return reply.code(200).send({ data: { token, expires_at: expiresAt.toISOString() } });
  });
};

export default auth;

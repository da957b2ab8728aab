import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Envelope, LoginMessages, LoginRequest, Messages, Session } from '@xfer/shared';
import { UnauthorizedError } from '../../errors.js';
import { verifyPassword } from '../../lib/crypto.js';
import type { SessionClaims } from '../../plugins/app/auth.js';
import { MfaService } from '../settings/mfa.service.js';

/**
 * POST /auth/login: email + password (+ `otp` once the user has MFA on) → a JWT session for the
 * console. Every outcome writes an `auth.login` record; failures name the reason, never the
 * password, code or secret.
 */
const auth: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const mfa = new MfaService(app.db, app.vault);

  app.post('/auth/login', { schema: { body: LoginRequest, response: { 200: Envelope(Session) } }, config: { access: { public: true } } }, async (request, reply) => {
    const email = request.body.email.trim().toLowerCase();
    const user = await app.db.users.findOne({ email }).lean();
    const refuse = async (reason: string, message: string = Messages.unauthenticated): Promise<never> => {
      await app.audit.record({
        accountId: user?.account_id ?? null,
        actor: { type: 'user', id: user ? String(user._id) : null },
        action: 'auth.login',
        ip: request.ip,
        outcome: 'failure',
        details: { reason },
      });
      throw new UnauthorizedError(message);
    };
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
      if (!otp) return refuse('otp required', LoginMessages.otpRequired);
      const check = await mfa.checkLoginCode(user, otp);
      if (check !== 'ok') return refuse(check);
    }

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

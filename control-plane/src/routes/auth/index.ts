import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { LoginRequest, Messages } from '@xfer/shared';
import { UnauthorizedError } from '../../errors.js';
import { verifyPassword } from '../../lib/crypto.js';
import type { SessionClaims } from '../../plugins/app/auth.js';

/** POST /auth/login: email + password → a JWT session for the console. */
const auth: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.post('/auth/login', { schema: { body: LoginRequest }, config: { access: { public: true } } }, async (request, reply) => {
    const email = request.body.email.trim().toLowerCase();
    const user = await app.db.users.findOne({ email }).lean();
    // verifyPassword does the same work when the user does not exist: timing reveals nothing.
    const ok = await verifyPassword(request.body.password, user?.password_hash ?? null);
    if (!user || !ok) {
      await app.audit.record({
        accountId: user?.account_id ?? null,
        actor: { type: 'user', id: user ? String(user._id) : null },
        action: 'auth.login',
        ip: request.ip,
        outcome: 'failure',
        details: { reason: user ? 'wrong password' : 'unknown email' },
      });
      throw new UnauthorizedError(Messages.unauthenticated);
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
    });
    const expiresAt = new Date(now.getTime() + app.config.sessionTtlSeconds * 1000);
    return reply.code(200).send({ data: { token, expires_at: expiresAt.toISOString() } });
  });
};

export default auth;

import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Envelope, LoginRequest, Session } from '@xfer/shared';

/**
 * POST /auth/login: email + password (+ `otp` once the user has MFA on) → a JWT session for the
 * console (plugins/app/access/login.service.ts: every outcome audited, repeated failures locked
 * out with 429 + Retry-After).
 */
const auth: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.post('/auth/login', { schema: { body: LoginRequest, response: { 200: Envelope(Session) } }, config: { access: { public: true } } }, async (request, reply) => {
    return reply.code(200).send({ data: await app.login.signIn(request.body, request.ip) });
  });
};

export default auth;

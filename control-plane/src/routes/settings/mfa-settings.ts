import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { UpdateMfaRequest, VerifyMfaRequest } from '@xfer/shared';
import { consoleUserOf } from '../../plugins/app/access/index.js';

const consoleOnly = { access: { consoleOnly: true } } as const;

/**
 * The signed-in user's TOTP second factor (plugins/app/access/mfa.service.ts), three steps:
 *
 * 1. `PUT /settings/mfa {enabled: true}` enrols: a new secret, answered once as base32 and as an
 *    `otpauth://` URL for the authenticator app; MFA stays off (`pending: true`). 409 while MFA is on.
 * 2. `POST /settings/mfa/verify {code}` turns MFA on when the code is valid for that secret
 *    (400 `code is not valid` otherwise): from then on, login needs `otp`.
 * 3. `PUT /settings/mfa {enabled: false, code}` turns it off with a current code of the active
 *    secret (400 without a valid, unused one); with no MFA on it just cancels a pending enrolment.
 *
 * `GET /settings/mfa` answers `{enabled, pending}`, never the secret. Every change writes a
 * `setting.update` record with `details.change` (enroll, activate, disable, cancel), and every
 * refused code a `failure` record with the reason; neither holds a code or a secret.
 */
const mfaSettings: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/settings/mfa', { config: consoleOnly }, async (request) => {
    return { data: await app.mfa.state(consoleUserOf(request)) };
  });

  app.put('/settings/mfa', { schema: { body: UpdateMfaRequest }, config: consoleOnly }, async (request) => {
    const user = consoleUserOf(request);
    if (request.body.enabled) return { data: await app.mfa.enroll(user, request) };
    return { data: await app.mfa.disable(user, request, request.body.code) };
  });

  app.post('/settings/mfa/verify', { schema: { body: VerifyMfaRequest }, config: consoleOnly }, async (request) => {
    return { data: await app.mfa.activate(consoleUserOf(request), request, request.body.code) };
  });
};

export default mfaSettings;

import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { UpdateMfaRequest, VerifyMfaRequest } from '@xfer/shared';
import { consoleUserOf, settingEntry } from '../../plugins/app/access/settings.service.js';
import { MfaCodeError, MfaService } from '../../plugins/app/access/mfa.service.js';

const consoleOnly = { access: { consoleOnly: true } } as const;

/**
 * The signed-in user's TOTP second factor (mfa.service.ts), three steps:
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
  const mfa = new MfaService(app.db, app.vault);

  /** Runs `change`, auditing a refused code before the 400 leaves. */
  async function auditingRefusals<T>(request: FastifyRequest, change: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      if (err instanceof MfaCodeError) {
        await app.audit.recordRequest(request, {
          action: 'setting.update', outcome: 'failure', resource: { type: 'setting', id: 'mfa' },
          details: { scope: 'user', change, reason: err.reason },
        });
      }
      throw err;
    }
  }

  app.get('/settings/mfa', { config: consoleOnly }, async (request) => {
    return { data: await mfa.state(consoleUserOf(request)) };
  });

  app.put('/settings/mfa', { schema: { body: UpdateMfaRequest }, config: consoleOnly }, async (request) => {
    const user = consoleUserOf(request);
    // Each change is recorded write-ahead: the service announces it once the code checks pass.
    if (request.body.enabled) {
      const enrolment = await app.audit.change(request, (announce) => mfa.enroll(user, () => announce(settingEntry('mfa', 'user', { change: 'enroll', enabled: false }))));
      return { data: enrolment };
    }
    const { setting } = await auditingRefusals(request, 'disable', () => app.audit.change(request, (announce) =>
      mfa.disable(user, request.body.code, (change) => announce(settingEntry('mfa', 'user', { change, enabled: false })))));
    return { data: setting };
  });

  app.post('/settings/mfa/verify', { schema: { body: VerifyMfaRequest }, config: consoleOnly }, async (request) => {
    const user = consoleUserOf(request);
    const setting = await auditingRefusals(request, 'activate', () => app.audit.change(request, (announce) =>
      mfa.activate(user, request.body.code, () => announce(settingEntry('mfa', 'user', { change: 'activate', enabled: true })))));
    return { data: setting };
  });
};

export default mfaSettings;

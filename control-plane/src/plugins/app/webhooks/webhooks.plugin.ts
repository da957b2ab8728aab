import fp from 'fastify-plugin';
import { AddressPolicy } from '../../../lib/ssrf-guard.js';
import { WebhooksService } from './webhooks.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    webhooks: WebhooksService;
  }
}

/**
 * Decorates `app.webhooks` (webhooks.service.ts). Warns once at start when
 * XFER_UNSAFE_WEBHOOK_ALLOW opens private addresses to webhook URLs.
 */
export default fp(
  async (app) => {
    const { unsafeAllowedAddresses } = app.config.webhooks;
    const policy = new AddressPolicy(unsafeAllowedAddresses);
    if (policy.unsafe) {
      app.log.warn(
        { unsafeAllowedAddresses },
        'UNSAFE: XFER_UNSAFE_WEBHOOK_ALLOW lets webhooks target these private addresses; for tests only, never in production',
      );
    }
    app.decorate('webhooks', new WebhooksService({ db: app.db, vault: app.vault, policy }));
  },
  { name: 'webhooks', dependencies: ['mongoose'] },
);

import fp from 'fastify-plugin';
import { AddressPolicy } from '../../../lib/ssrf-guard.js';
import { WebhookDelivererService, type WebhookDeliverer } from './deliverer.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    webhookDeliverer: WebhookDeliverer;
  }
}

/**
 * Decorates `app.webhookDeliverer` (deliverer.service.ts) and runs its loop while the app is up:
 * it starts when the app is ready and stops when the app closes, before the database does
 * (attempts in flight are waited for, so each records its outcome).
 */
export default fp(
  async (app) => {
    const { webhooks: settings } = app.config;
    const deliverer = new WebhookDelivererService({
      db: app.db,
      webhooks: app.webhooks,
      log: app.log,
      metrics: app.metrics,
      policy: new AddressPolicy(settings.unsafeAllowedAddresses),
      timeoutMs: settings.timeoutMs,
      retryWindowMs: settings.retryWindowMs,
      backoffBaseMs: settings.backoffBaseMs,
      backoffMaxMs: settings.backoffMaxMs,
      pollMs: settings.pollMs,
    });
    app.decorate<WebhookDeliverer>('webhookDeliverer', deliverer);
    app.addHook('onReady', async () => deliverer.start());
    app.addHook('preClose', () => deliverer.stop());
  },
  { name: 'webhook-deliverer', dependencies: ['mongoose', 'webhooks', 'metrics'] },
);

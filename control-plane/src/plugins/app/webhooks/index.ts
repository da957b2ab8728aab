import fp from 'fastify-plugin';
import outboxPlugin from './outbox.js';
import webhooksPlugin from './webhooks.plugin.js';
import delivererPlugin from './deliverer.plugin.js';

export { OUTBOX_EVENT_TYPES, OutboxService, type Outbox, type OutboxEventType } from './outbox.js';
export type { WebhooksService } from './webhooks.service.js';
export type { OutboxConsumer, WebhookDeliverer, WebhookDelivererService, WebhookTransport } from './deliverer.service.js';

/**
 * The webhooks domain: the events outbox (`app.outbox`, outbox.ts), the account's webhooks and
 * their deliveries (`app.webhooks`, webhooks.service.ts), and the deliverer that sends outbox
 * events to them (`app.webhookDeliverer`, deliverer.service.ts, through sender.ts).
 */
export default fp(
  async (app) => {
    await app.register(outboxPlugin);
    await app.register(webhooksPlugin);
    await app.register(delivererPlugin);
  },
  { name: 'webhooks-domain', dependencies: ['mongoose'] },
);

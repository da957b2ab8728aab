import fp from 'fastify-plugin';
import { AddressPolicy } from '../../../lib/ssrf-guard.js';
import { NotificationsService } from './notifications.service.js';
import { NotificationDelivererService, type NotificationDeliverer } from './deliverer.service.js';

export type { NotificationsService } from './notifications.service.js';
export type { NotificationDeliverer, QueuedEmail } from './deliverer.service.js';
export type { MailTransport } from './mailer.js';
export { renderEmail } from './message.js';

declare module 'fastify' {
  interface FastifyInstance {
    notifications: NotificationsService;
    notificationDeliverer: NotificationDeliverer;
  }
}

/**
 * The notifications domain (docs/api.md "Notifications"): the account's settings and log
 * (`app.notifications`) and the deliverer that emails outbox events (`app.notificationDeliverer`).
 * Outbox events reach it through the webhook fan-out (`webhookDeliverer.onFanOut`), so one pass
 * over the outbox serves both and the event is marked done once both have their rows. Warns once
 * at start when XFER_UNSAFE_SMTP_ALLOW opens private addresses to SMTP servers.
 */
export default fp(
  async (app) => {
    const settings = app.config.notifications;
    const policy = new AddressPolicy(settings.unsafeAllowedAddresses, 'XFER_UNSAFE_SMTP_ALLOW');
    if (policy.unsafe) {
      app.log.warn(
        { unsafeAllowedAddresses: settings.unsafeAllowedAddresses },
        'UNSAFE: XFER_UNSAFE_SMTP_ALLOW lets SMTP servers be at these private addresses; for tests only, never in production',
      );
    }
    const notifications = new NotificationsService({ db: app.db, vault: app.vault, policy });
    const deliverer = new NotificationDelivererService({
      db: app.db, notifications, log: app.log, policy,
      timeoutMs: settings.timeoutMs, retryWindowMs: settings.retryWindowMs, backoffBaseMs: settings.backoffBaseMs, backoffMaxMs: settings.backoffMaxMs, pollMs: settings.pollMs,
    });
    app.webhookDeliverer.onFanOut((event) => deliverer.fanOut(event));
    app.decorate('notifications', notifications);
    app.decorate<NotificationDeliverer>('notificationDeliverer', deliverer);
    app.addHook('onReady', async () => deliverer.start());
    app.addHook('preClose', () => deliverer.stop());
  },
  { name: 'notifications', dependencies: ['mongoose', 'webhook-deliverer'] },
);

import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  Envelope, ListNotificationLogQuery, NotificationLogEntry, NotificationSettings, NotificationTestResult, Page, UpdateNotificationSettingsRequest,
} from '@xfer/shared';
import { principalOf, requireEventsReadableFor } from '../../plugins/app/access/index.js';

const read = { access: { scope: 'notifications:read' } } as const;
const write = { access: { scope: 'notifications:write' } } as const;

/**
 * Notifications (docs/api.md "Notifications"): the account's settings (the SMTP password is
 * write-only: `has_password`), a test message, and the log of what was sent.
 */
const notifications: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/notifications/settings', {
    schema: { response: { 200: Envelope(NotificationSettings) } },
    config: read,
  }, async (request) => {
    const { accountId } = principalOf(request);
    return { data: await app.notifications.get(accountId) };
  });

  app.put('/notifications/settings', {
    schema: { body: UpdateNotificationSettingsRequest, response: { 200: Envelope(NotificationSettings) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    // The recipients receive what the events carry: saving the list needs the read scope of each (docs/security.md "Event subscriptions").
    await requireEventsReadableFor(app.audit, request, request.body.events, 'notifications.settings.update', { type: 'notification_settings', id: null });
    const settings = await app.audit.change(request, (announce) => app.notifications.put(accountId, request.body, (details) => announce({
      action: 'notifications.settings.update', outcome: 'success', resource: { type: 'notification_settings', id: null }, details,
    })));
    return { data: settings };
  });

  /** Sends a test message now, one attempt, and answers how it went: 200 whatever the outcome. */
  app.post('/notifications/test', {
    schema: { response: { 200: Envelope(NotificationTestResult) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const outcome = await app.notificationDeliverer.sendTest(accountId);
    await app.audit.recordRequest(request, {
      action: 'notifications.test', outcome: outcome.success ? 'success' : 'failure', resource: { type: 'notification', id: outcome.log_id },
      details: { error: outcome.error },
    });
    return { data: outcome };
  });

  app.get('/notifications/log', {
    schema: { querystring: ListNotificationLogQuery, response: { 200: Page(NotificationLogEntry) } },
    config: read,
  }, async (request) => {
    const { accountId } = principalOf(request);
    return app.notifications.log(accountId, request.query);
  });
};

export default notifications;

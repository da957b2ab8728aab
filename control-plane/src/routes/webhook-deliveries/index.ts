import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Envelope, IdParams, ListWebhookDeliveriesQuery, Page, WebhookDelivery, WebhookTestResult } from '@xfer/shared';
import { NotFoundError } from '../../errors.js';
import { principalOf } from '../../plugins/app/access/index.js';

/**
 * Deliveries of a webhook and its test event (the webhook itself is routes/webhooks/). Team plan,
 * like every webhook route; another account's webhook is 404.
 */
const webhookDeliveries: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/webhooks/:id/deliveries', {
    schema: { params: IdParams, querystring: ListWebhookDeliveriesQuery, response: { 200: Page(WebhookDelivery) } },
    config: { access: { scope: 'webhooks:read', teamPlan: true } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    return app.webhooks.listDeliveries(accountId, request.params.id, request.query);
  });

  /** Sends `webhook.test` now, one attempt, and answers how it went: 200 whatever the outcome. */
  app.post('/webhooks/:id/test', {
    schema: { params: IdParams, response: { 200: Envelope(WebhookTestResult) } },
    config: { access: { scope: 'webhooks:write', teamPlan: true } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const outcome = await app.webhookDeliverer.sendTest(accountId, await app.webhooks.ownId(accountId, request.params.id));
    if (!outcome) throw new NotFoundError(`Webhook ${request.params.id} not found`);
    await app.audit.recordRequest(request, {
      action: 'webhook.test', outcome: outcome.success ? 'success' : 'failure', resource: { type: 'webhook', id: request.params.id },
      details: { delivery_id: outcome.delivery_id, status_code: outcome.status_code, error: outcome.error },
    });
    return { data: outcome };
  });
};

export default webhookDeliveries;

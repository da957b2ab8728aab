import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Types } from 'mongoose';
import { Envelope, IdParams, ListWebhookDeliveriesQuery, Page, WebhookDelivery, WebhookTestResult, type WebhookAttempt } from '@xfer/shared';
import { NotFoundError } from '../../errors.js';
import { paginate, toObjectId } from '../../lib/pagination.js';
import { principalOf } from '../../plugins/app/access/index.js';
import type { WebhookAttemptDoc, WebhookDeliveryDoc } from '../../models/webhook-delivery.model.js';

type Stored<T> = T & { _id: Types.ObjectId };

function presentAttempt(a: Stored<WebhookAttemptDoc>): WebhookAttempt {
  return { n: a.n, at: a.started_at.toISOString(), status_code: a.status_code ?? null, duration_ms: a.duration_ms ?? null, error: a.error ?? null };
}

function presentDelivery(d: Stored<WebhookDeliveryDoc>, attempts: Array<Stored<WebhookAttemptDoc>>): WebhookDelivery {
  return {
    id: String(d._id),
    event: d.event,
    event_id: String(d.event_id),
    status: d.status,
    attempts: attempts.length,
    // While an attempt is in flight this holds its lease end, which is not a scheduled attempt.
    next_attempt_at: d.status === 'pending' && d.next_attempt_at && !attempts.some((a) => !a.finished_at)
      ? d.next_attempt_at.toISOString()
      : null,
    created_at: d.created_at.toISOString(),
    delivered_at: d.delivered_at ? d.delivered_at.toISOString() : null,
    attempt_log: attempts.map(presentAttempt),
  };
}

/**
 * Deliveries of a webhook and its test event (the webhook itself is routes/webhooks/). Team plan,
 * like every webhook route; another account's webhook is 404.
 */
const webhookDeliveries: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  async function ownWebhookId(accountId: string, id: string): Promise<Types.ObjectId> {
    const objectId = toObjectId(id);
    const found = objectId && await app.db.webhooks.exists({ _id: objectId, account_id: accountId });
    if (!objectId || !found) throw new NotFoundError(`Webhook ${id} not found`);
    return objectId;
  }

  app.get('/webhooks/:id/deliveries', {
    schema: { params: IdParams, querystring: ListWebhookDeliveriesQuery, response: { 200: Page(WebhookDelivery) } },
    config: { access: { scope: 'webhooks:read', teamPlan: true } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const webhookId = await ownWebhookId(accountId, request.params.id);
    const { status, ...page } = request.query;
    const filter = { account_id: accountId, webhook_id: webhookId, ...(status ? { status } : {}) };
    const listed = await paginate(app.db.webhookDeliveries, filter, page, (d) => d);
    const attempts = await app.db.webhookAttempts
      .find({ account_id: accountId, delivery_id: { $in: listed.data.map((d) => d._id) } })
      .sort({ delivery_id: 1, n: 1 }).lean();
    const byDelivery = new Map<string, typeof attempts>();
    for (const a of attempts) {
      const key = String(a.delivery_id);
      byDelivery.set(key, [...(byDelivery.get(key) ?? []), a]);
    }
    return { data: listed.data.map((d) => presentDelivery(d, byDelivery.get(String(d._id)) ?? [])), next_cursor: listed.next_cursor };
  });

  /** Sends `webhook.test` now, one attempt, and answers how it went: 200 whatever the outcome. */
  app.post('/webhooks/:id/test', {
    schema: { params: IdParams, response: { 200: Envelope(WebhookTestResult) } },
    config: { access: { scope: 'webhooks:write', teamPlan: true } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const outcome = await app.webhookDeliverer.sendTest(accountId, await ownWebhookId(accountId, request.params.id));
    if (!outcome) throw new NotFoundError(`Webhook ${request.params.id} not found`);
    await app.audit.recordRequest(request, {
      action: 'webhook.test', outcome: outcome.success ? 'success' : 'failure', resource: { type: 'webhook', id: request.params.id },
      details: { delivery_id: outcome.delivery_id, status_code: outcome.status_code, error: outcome.error },
    });
    return { data: outcome };
  });
};

export default webhookDeliveries;

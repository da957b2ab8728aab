import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  CreateWebhookRequest, CreateWebhookResponse, Deleted, Envelope, IdParams, ListWebhooksQuery, Messages, Page, UpdateWebhookRequest, Webhook,
} from '@xfer/shared';
import { principalOf, requireEventsReadableFor } from '../../plugins/app/access/index.js';

const read = { access: { scope: 'webhooks:read', teamPlan: true } } as const;
const write = { access: { scope: 'webhooks:write', teamPlan: true } } as const;

/**
 * Webhooks (api.md "Webhooks"; decisions.md "Webhooks"; docs/api.md "Webhooks"). Team plan or
 * higher. The signing secret is write-only: the response schemas have no place for it except the
 * create answer's generated `secret`. Test sends and deliveries live in routes/webhook-deliveries.
 * Saving a webhook needs the read scope of every event type it carries (docs/security.md "Event
 * subscriptions"): its URL receives what they carry.
 */
const webhooks: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/webhooks', {
    schema: { querystring: ListWebhooksQuery, response: { 200: Page(Webhook) } },
    config: read,
  }, async (request) => {
    const { accountId } = principalOf(request);
    return app.webhooks.list(accountId, request.query);
  });

  app.post('/webhooks', {
    schema: { body: CreateWebhookRequest, response: { 201: CreateWebhookResponse } },
    config: write,
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    await requireEventsReadableFor(app.audit, request, request.body.events, 'webhook.create');
    const { webhook, generatedSecret } = await app.audit.change(request, (announce) => app.webhooks.create(accountId, request.body, (id, details) => announce({
      action: 'webhook.create', outcome: 'success', resource: { type: 'webhook', id }, details,
    })));
    if (!generatedSecret) return reply.code(201).send({ data: webhook });
    return reply.code(201).send({ data: { ...webhook, secret: generatedSecret }, warning: Messages.webhookSecretWarning });
  });

  app.get('/webhooks/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Webhook) } },
    config: read,
  }, async (request) => {
    const { accountId } = principalOf(request);
    return { data: await app.webhooks.get(accountId, request.params.id) };
  });

  app.put('/webhooks/:id', {
    schema: { params: IdParams, body: UpdateWebhookRequest, response: { 200: Envelope(Webhook) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const { id } = request.params;
    // Whoever saves a webhook chooses where its events go (and with which secret): the events it will carry are checked, those kept too.
    const events = request.body.events ?? (await app.webhooks.get(accountId, id)).events;
    await requireEventsReadableFor(app.audit, request, events, 'webhook.update', { type: 'webhook', id });
    const { webhook } = await app.audit.change(request, (announce) => app.webhooks.update(accountId, request.params.id, request.body, (id, details) => announce({
      action: 'webhook.update', outcome: 'success', resource: { type: 'webhook', id }, details,
    })));
    return { data: webhook };
  });

  app.delete('/webhooks/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const deleted = await app.audit.change(request, (announce) => app.webhooks.delete(accountId, request.params.id, (id, details) => announce({
      action: 'webhook.delete', outcome: 'success', resource: { type: 'webhook', id }, details,
    })));
    return { data: { id: deleted.id, deleted: true as const } };
  });
};

export default webhooks;

import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  CreateWebhookRequest, CreateWebhookResponse, Deleted, Envelope, IdParams, ListWebhooksQuery, Messages, Page, UpdateWebhookRequest, Webhook,
} from '@xfer/shared';
import { paginate } from '../../lib/pagination.js';
import { AddressPolicy } from '../../lib/ssrf-guard.js';
import { principalOf } from '../../plugins/app/auth.js';
import {
  createWebhook, deleteWebhook, getWebhook, presentWebhook, updateWebhook, type WebhookDeps,
} from '../../plugins/app/webhooks/webhooks.service.js';

const read = { access: { scope: 'webhooks:read', teamPlan: true } } as const;
const write = { access: { scope: 'webhooks:write', teamPlan: true } } as const;

/**
 * Webhooks (api.md "Webhooks"; decisions.md "Webhooks"; docs/api.md "Webhooks"). Team plan or
 * higher. The signing secret is write-only: the response schemas have no place for it except the
 * create answer's generated `secret`. Test sends and deliveries live in routes/webhook-deliveries.
 */
const webhooks: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const { unsafeAllowedAddresses } = app.config.webhooks;
  const deps: WebhookDeps = { db: app.db, vault: app.vault, policy: new AddressPolicy(unsafeAllowedAddresses) };
  if (deps.policy.unsafe) {
    app.log.warn(
      { unsafeAllowedAddresses },
      'UNSAFE: XFER_UNSAFE_WEBHOOK_ALLOW lets webhooks target these private addresses; for tests only, never in production',
    );
  }

  app.get('/webhooks', {
    schema: { querystring: ListWebhooksQuery, response: { 200: Page(Webhook) } },
    config: read,
  }, async (request) => {
    const { accountId } = principalOf(request);
    return paginate(app.db.webhooks, { account_id: accountId }, request.query, presentWebhook);
  });

  app.post('/webhooks', {
    schema: { body: CreateWebhookRequest, response: { 201: CreateWebhookResponse } },
    config: write,
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    const { webhook, generatedSecret } = await app.audit.change(request, (announce) => createWebhook(deps, accountId, request.body, (id, details) => announce({
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
    return { data: await getWebhook(app.db, accountId, request.params.id) };
  });

  app.put('/webhooks/:id', {
    schema: { params: IdParams, body: UpdateWebhookRequest, response: { 200: Envelope(Webhook) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const { webhook } = await app.audit.change(request, (announce) => updateWebhook(deps, accountId, request.params.id, request.body, (id, details) => announce({
      action: 'webhook.update', outcome: 'success', resource: { type: 'webhook', id }, details,
    })));
    return { data: webhook };
  });

  app.delete('/webhooks/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const deleted = await app.audit.change(request, (announce) => deleteWebhook(app.db, accountId, request.params.id, (id, details) => announce({
      action: 'webhook.delete', outcome: 'success', resource: { type: 'webhook', id }, details,
    })));
    return { data: { id: deleted.id, deleted: true as const } };
  });
};

export default webhooks;

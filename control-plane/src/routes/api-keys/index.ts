import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { ApiKey, CreateApiKeyRequest, CreatedApiKey, Deleted, Envelope, IdParams, ListApiKeysQuery, Messages, Page } from '@xfer/shared';
import { principalOf } from '../../plugins/app/access/index.js';

/** API keys (api.md "API keys"; decisions.md "API keys"). Team plan or higher. */
const apiKeys: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/api-keys', {
    schema: { querystring: ListApiKeysQuery, response: { 200: Page(ApiKey) } },
    config: { access: { scope: 'api-keys:read', teamPlan: true } },
  }, async (request) => app.apiKeys.list(principalOf(request).accountId, request.query));

  app.post('/api-keys', {
    schema: { body: CreateApiKeyRequest, response: { 201: Type.Object({ data: CreatedApiKey, warning: Type.String() }) } },
    config: { access: { scope: 'api-keys:write', teamPlan: true } },
  }, async (request, reply) => {
    const { record, key } = await app.apiKeys.create(principalOf(request), request, request.body);
    return reply.code(201).send({ data: { ...record, key }, warning: Messages.apiKeyWarning });
  });

  app.delete('/api-keys/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: { access: { scope: 'api-keys:write', teamPlan: true } },
  }, async (request) => {
    const { id } = await app.apiKeys.revoke(principalOf(request), request, request.params.id);
    return { data: { id, deleted: true as const } };
  });
};

export default apiKeys;

import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { CreateApiKeyRequest, IdParams, isScope, Messages, PageQuery, type Scope } from '@xfer/shared';
import { BadRequestError, ForbiddenError, NotFoundError } from '../../errors.js';
import { paginate, toObjectId } from '../../lib/pagination.js';
import { principalOf } from '../../plugins/app/auth.js';
import { issueApiKey, presentApiKey } from './api-keys.service.js';

const DAY_MS = 24 * 3600 * 1000;

/** API keys (api.md "API keys"; decisions.md "API keys"). Team plan or higher. */
const apiKeys: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/api-keys', {
    schema: { querystring: PageQuery },
    config: { access: { scope: 'api-keys:read', teamPlan: true } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    return paginate(app.db.apiKeys, { account_id: accountId, revoked_at: null }, request.query, presentApiKey);
  });

  app.post('/api-keys', {
    schema: { body: CreateApiKeyRequest },
    config: { access: { scope: 'api-keys:write', teamPlan: true } },
  }, async (request, reply) => {
    const principal = principalOf(request);
    const { name, scopes, expires_in_days } = request.body;
    const unknown = scopes.filter((s) => !isScope(s));
    if (unknown.length > 0) throw new BadRequestError(`scopes contains unknown scope: ${unknown.join(', ')}`);
    const beyond = (scopes as Scope[]).filter((s) => !principal.scopes.has(s));
    if (beyond.length > 0) {
      await app.audit.recordRequest(request, {
        action: 'api_key.create', outcome: 'denied', details: { name, reason: 'scope escalation', scopes: beyond },
      });
      throw new ForbiddenError(Messages.scopeEscalation);
    }
    const expiresAt = expires_in_days ? new Date(Date.now() + expires_in_days * DAY_MS) : null;
    const { record, key } = await app.audit.change(request, (announce) => issueApiKey(app.db, {
      accountId: principal.accountId, name: name.trim(), scopes: scopes as Scope[], expiresAt, createdBy: principal.actor,
    }, (id, details) => announce({ action: 'api_key.create', outcome: 'success', resource: { type: 'api_key', id }, details })));
    return reply.code(201).send({ data: { ...record, key }, warning: Messages.apiKeyWarning });
  });

  app.delete('/api-keys/:id', {
    schema: { params: IdParams },
    config: { access: { scope: 'api-keys:write', teamPlan: true } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const id = toObjectId(request.params.id);
    const target = id && await app.db.apiKeys.findOne({ _id: id, account_id: accountId, revoked_at: null }).lean();
    if (!target) throw new NotFoundError(`API key ${request.params.id} not found`);
    await app.audit.change(request, async (announce) => {
      await announce({ action: 'api_key.revoke', outcome: 'success', resource: { type: 'api_key', id: String(target._id) }, details: { name: target.name, key_prefix: target.key_prefix } });
      const revoked = await app.db.apiKeys.updateOne({ _id: target._id, account_id: accountId, revoked_at: null }, { $set: { revoked_at: new Date() } });
      if (revoked.modifiedCount !== 1) throw new NotFoundError(`API key ${request.params.id} not found`);
    });
    return { data: { id: String(target._id), deleted: true } };
  });
};

export default apiKeys;

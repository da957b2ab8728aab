import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import {
  ApiKey, CreateApiKeyRequest, CreatedApiKey, Deleted, Envelope, IdParams, isScope, Messages, Page, PageQuery, type Scope,
} from '@xfer/shared';
import { BadRequestError, ForbiddenError, NotFoundError } from '../../errors.js';
import { paginate, toObjectId } from '../../lib/pagination.js';
import { callerExpiresAt, principalOf, requireExpiryWithin, requireKeyWithin } from '../../plugins/app/access/index.js';
import { issueApiKey, presentApiKey } from '../../plugins/app/access/api-keys.service.js';

const DAY_MS = 24 * 3600 * 1000;
const MAX_LIFETIME_MS = 3650 * DAY_MS;

/** The requested end of life: `expires_at` or `expires_in_days` (not both), or null for none. */
function requestedExpiry(body: { expires_in_days?: number; expires_at?: string }, now: number): Date | null {
  if (body.expires_at !== undefined && body.expires_in_days !== undefined) {
    throw new BadRequestError('body.expires_at and body.expires_in_days cannot both be given');
  }
  if (body.expires_in_days !== undefined) return new Date(now + body.expires_in_days * DAY_MS);
  if (body.expires_at === undefined) return null;
  const at = new Date(body.expires_at);
  if (at.getTime() <= now) throw new BadRequestError('body.expires_at must be in the future');
  if (at.getTime() > now + MAX_LIFETIME_MS) throw new BadRequestError('body.expires_at must be within 3650 days');
  return at;
}

/** API keys (api.md "API keys"; decisions.md "API keys"). Team plan or higher. */
const apiKeys: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/api-keys', {
    schema: { querystring: PageQuery, response: { 200: Page(ApiKey) } },
    config: { access: { scope: 'api-keys:read', teamPlan: true } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    return paginate(app.db.apiKeys, { account_id: accountId, revoked_at: null }, request.query, presentApiKey);
  });

  app.post('/api-keys', {
    schema: { body: CreateApiKeyRequest, response: { 201: Type.Object({ data: CreatedApiKey, warning: Type.String() }) } },
    config: { access: { scope: 'api-keys:write', teamPlan: true } },
  }, async (request, reply) => {
    const principal = principalOf(request);
    const { name, scopes } = request.body;
    const unknown = scopes.filter((s) => !isScope(s));
    if (unknown.length > 0) throw new BadRequestError(`scopes contains unknown scope: ${unknown.join(', ')}`);
    const beyond = (scopes as Scope[]).filter((s) => !principal.scopes.has(s));
    if (beyond.length > 0) {
      await app.audit.recordRequest(request, {
        action: 'api_key.create', outcome: 'denied', details: { name, reason: 'scope escalation', scopes: beyond },
      });
      throw new ForbiddenError(Messages.scopeEscalation);
    }
    const expiresAt = requestedExpiry(request.body, Date.now());
    try {
      requireExpiryWithin(await callerExpiresAt(app.db, principal), expiresAt, 'key');
    } catch (err) {
      await app.audit.recordRequest(request, {
        action: 'api_key.create', outcome: 'denied',
        details: { name, reason: 'expiry beyond the calling key', expires_at: expiresAt?.toISOString() ?? null },
      });
      throw err;
    }
    const { record, key } = await app.audit.change(request, (announce) => issueApiKey(app.db, {
      accountId: principal.accountId, name: name.trim(), scopes: scopes as Scope[], expiresAt, createdBy: principal.actor,
    }, (id, details) => announce({ action: 'api_key.create', outcome: 'success', resource: { type: 'api_key', id }, details })));
    return reply.code(201).send({ data: { ...record, key }, warning: Messages.apiKeyWarning });
  });

  app.delete('/api-keys/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: { access: { scope: 'api-keys:write', teamPlan: true } },
  }, async (request) => {
    const principal = principalOf(request);
    const { accountId } = principal;
    const id = toObjectId(request.params.id);
    const target = id && await app.db.apiKeys.findOne({ _id: id, account_id: accountId, revoked_at: null }, { scopes: 1, name: 1, key_prefix: 1 }).lean();
    if (!target) throw new NotFoundError(`API key ${request.params.id} not found`);
    try {
      requireKeyWithin(principal, target.scopes);
    } catch (err) {
      await app.audit.recordRequest(request, {
        action: 'api_key.revoke', outcome: 'denied', resource: { type: 'api_key', id: String(target._id) },
        details: { name: target.name, reason: 'scope escalation', scopes: target.scopes.filter((s) => !principal.scopes.has(s as Scope)) },
      });
      throw err;
    }
    // A key's scopes never change, so the check above still holds for the update below.
    // Recorded write-ahead (plugins/app/audit.ts `change`).
    await app.audit.change(request, async (announce) => {
      await announce({ action: 'api_key.revoke', outcome: 'success', resource: { type: 'api_key', id: String(target._id) }, details: { name: target.name, key_prefix: target.key_prefix } });
      const revoked = await app.db.apiKeys.updateOne({ _id: target._id, account_id: accountId, revoked_at: null }, { $set: { revoked_at: new Date() } });
      if (revoked.modifiedCount !== 1) throw new NotFoundError(`API key ${request.params.id} not found`);
    });
    return { data: { id: String(target._id), deleted: true as const } };
  });
};

export default apiKeys;

import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  Connection, CreateConnectionRequest, Deleted, Envelope, IdParams, ListConnectionsQuery, Page, UpdateConnectionRequest,
} from '@xfer/shared';
import { paginate } from '../../lib/pagination.js';
import { principalOf } from '../../plugins/app/auth.js';
import {
  createConnection, deleteConnection, getConnection, presentConnection, updateConnection,
} from './connections.service.js';

/**
 * Connections (api.md "Connections"; decisions.md "Connections"). Credentials are write-only:
 * the response schemas have no place for them, and audit records carry names and types only.
 */
const connections: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/connections', {
    schema: { querystring: ListConnectionsQuery, response: { 200: Page(Connection) } },
    config: { access: { scope: 'connections:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const { type, ...page } = request.query;
    return paginate(app.db.connections, { account_id: accountId, ...(type ? { type } : {}) }, page, presentConnection);
  });

  app.post('/connections', {
    schema: { body: CreateConnectionRequest, response: { 201: Envelope(Connection) } },
    config: { access: { scope: 'connections:write' } },
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    const connection = await createConnection(app.db, app.vault, accountId, request.body);
    await app.audit.recordRequest(request, {
      action: 'connection.create', outcome: 'success',
      resource: { type: 'connection', id: connection.id }, details: { name: connection.name, type: connection.type },
    });
    return reply.code(201).send({ data: connection });
  });

  app.get('/connections/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Connection) } },
    config: { access: { scope: 'connections:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    return { data: await getConnection(app.db, accountId, request.params.id) };
  });

  app.put('/connections/:id', {
    schema: { params: IdParams, body: UpdateConnectionRequest, response: { 200: Envelope(Connection) } },
    config: { access: { scope: 'connections:write' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const { connection, changed } = await updateConnection(app.db, app.vault, accountId, request.params.id, request.body);
    await app.audit.recordRequest(request, {
      action: 'connection.update', outcome: 'success',
      resource: { type: 'connection', id: connection.id }, details: { name: connection.name, type: connection.type, changed },
    });
    return { data: connection };
  });

  app.delete('/connections/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: { access: { scope: 'connections:write' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const deleted = await deleteConnection(app.db, accountId, request.params.id);
    await app.audit.recordRequest(request, {
      action: 'connection.delete', outcome: 'success',
      resource: { type: 'connection', id: deleted.id }, details: { name: deleted.name, type: deleted.type },
    });
    return { data: { id: deleted.id, deleted: true as const } };
  });
};

export default connections;

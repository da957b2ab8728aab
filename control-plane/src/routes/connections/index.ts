import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  Connection, CreateConnectionRequest, Deleted, Envelope, IdParams, ListConnectionsQuery, Page, TestResult, UpdateConnectionRequest,
} from '@xfer/shared';
import { mapPage } from '../../lib/pagination.js';
import { principalOf } from '../../plugins/app/access/index.js';
import { presentConnection } from './connections.presenter.js';
import { runConnection } from '../../plugins/app/transfers/index.js';

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
    return mapPage(await app.connections.list(accountId, request.query), presentConnection);
  });

  app.post('/connections', {
    schema: { body: CreateConnectionRequest, response: { 201: Envelope(Connection) } },
    config: { access: { scope: 'connections:write' } },
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    const connection = await app.audit.change(request, (announce) => app.connections.create(accountId, request.body, ({ id, name, type }) => announce({
      action: 'connection.create', outcome: 'success', resource: { type: 'connection', id }, details: { name, type },
    })));
    return reply.code(201).send({ data: presentConnection(connection) });
  });

  app.get('/connections/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Connection) } },
    config: { access: { scope: 'connections:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    return { data: presentConnection(await app.connections.get(accountId, request.params.id)) };
  });

  app.put('/connections/:id', {
    schema: { params: IdParams, body: UpdateConnectionRequest, response: { 200: Envelope(Connection) } },
    config: { access: { scope: 'connections:write' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const { connection } = await app.audit.change(request, (announce) => app.connections.update(accountId, request.params.id, request.body, ({ id, name, type, changed }) => announce({
      action: 'connection.update', outcome: 'success', resource: { type: 'connection', id }, details: { name, type, changed },
    })));
    return { data: presentConnection(connection) };
  });

  app.delete('/connections/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: { access: { scope: 'connections:write' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const deleted = await app.audit.change(request, (announce) => app.connections.remove(accountId, request.params.id, ({ id, name, type }) => announce({
      action: 'connection.delete', outcome: 'success', resource: { type: 'connection', id }, details: { name, type },
    })));
    return { data: { id: String(deleted._id), deleted: true as const } };
  });

  /**
   * Runs the connection's check on the agent that serves it (the agent it is pinned to, else a
   * suitable online agent). 200 whatever the outcome; 503 when no agent can run it.
   */
  app.post('/connections/:id/test', {
    schema: { params: IdParams, response: { 200: Envelope(TestResult) } },
    config: { access: { scope: 'connections:write' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const stored = await app.connections.get(accountId, request.params.id);
    const connection = presentConnection(stored);
    const agent = await app.agents.choose(accountId, runConnection(stored));
    const result = await app.agentRequests.call(
      { accountId, agentId: String(agent._id), kind: 'connection.test', connectionId: connection.id },
      app.dispatcher.stopping,
    );
    await app.audit.recordRequest(request, {
      action: 'connection.test', outcome: result.success ? 'success' : 'failure',
      resource: { type: 'connection', id: connection.id },
      details: { name: connection.name, type: connection.type, agent_id: String(agent._id), latency_ms: result.latency_ms },
    });
    return { data: result };
  });
};

export default connections;

import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  Agent, AGENT_TOKEN_WARNING, CloseCodes, CreateAgentRequest, CreateAgentResponse, Deleted, Envelope, IdParams, ListAgentsQuery,
  Page, TestResult, UpdateAgentRequest,
} from '@xfer/shared';
import { ServiceUnavailableError } from '../../errors.js';
import { isAdministrator, principalOf, requireAdministrator } from '../../plugins/app/access/index.js';
import { agentNotFound, type StoredAgent } from '../../plugins/app/agents/index.js';
import { presentAgent } from './agents.presenter.js';
import connect from './connect.js';

/**
 * Managed agents (decisions.md "Agents"): agents:read for reads, agents:write for create,
 * update, revoke and test; an administrator approves an agent, and changes the labels and limit
 * of an approved one (docs/security.md "Agents: approval"). The token is shown once, in the
 * create response; it is stored as SHA-256 only and never appears in a later response, a log line
 * or an audit record.
 */
const agents: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  /** An administrator's act (`requireAdministrator`); a refusal is recorded `denied` before the 403 goes out. */
  const administratorOnly = async (request: FastifyRequest, what: string, action: string, id: string) => {
    try {
      requireAdministrator(principalOf(request), what);
    } catch (err) {
      await app.audit.recordRequest(request, { action, outcome: 'denied', resource: { type: 'agent', id }, details: { reason: 'not an administrator' } });
      throw err;
    }
  };

  await app.register(connect);

  app.get('/agents', {
    schema: { querystring: ListAgentsQuery, response: { 200: Page(Agent) } },
    config: { access: { scope: 'agents:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const page = await app.agents.list(accountId, request.query);
    const load = await app.agents.loadOf(page.data.map((a) => a._id));
    return { data: page.data.map((a) => presentAgent(a, load.get(String(a._id))!, app.agents.isOnline(a))), next_cursor: page.next_cursor };
  });

  /** Approved when an administrator creates it; pending (serving only connections pinned to it) otherwise. */
  app.post('/agents', {
    schema: { body: CreateAgentRequest, response: { 201: CreateAgentResponse } },
    config: { access: { scope: 'agents:write' } },
  }, async (request, reply) => {
    const principal = principalOf(request);
    const approved = isAdministrator(principal);
    const { doc, token } = await app.audit.change(request, (announce) => app.agents.create(principal.accountId, request.body, principal.actor, approved, (id, details) => announce({
      action: 'agent.create', outcome: 'success', resource: { type: 'agent', id }, details,
    })));
    const agent = presentAgent(doc, { running: [], slotsHeld: 0 }, app.agents.isOnline(doc));
    return reply.code(201).send({ data: { ...agent, token }, warning: AGENT_TOKEN_WARNING });
  });

  app.get('/agents/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Agent) } },
    config: { access: { scope: 'agents:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const doc = await app.agents.find(accountId, request.params.id);
    const load = await app.agents.loadOf([doc._id]);
    return { data: presentAgent(doc, load.get(String(doc._id))!, app.agents.isOnline(doc)) };
  });

  /**
   * Changes the given fields: `name`, `labels` (the account's; the pools an agent is in are these
   * and its own `--label`s), `max_jobs` (a cap on the jobs it runs at once, below its own
   * `--max-jobs`; null removes it). A new limit applies to the next start: a lowered one lets
   * running jobs finish. `labels` and `max_jobs` of an approved agent: an administrator's.
   * Audited with each changed field's value before and after.
   */
  app.put('/agents/:id', {
    schema: { params: IdParams, body: UpdateAgentRequest, response: { 200: Envelope(Agent) } },
    config: { access: { scope: 'agents:write' } },
  }, async (request) => {
    const principal = principalOf(request);
    const mayChangeServing = (fields: string[]) => administratorOnly(request, `Changing ${fields.join(' and ')} of an approved agent`, 'agent.update', request.params.id);
    const doc = await app.audit.change(request, (announce) => app.agents.update(principal.accountId, request.params.id, request.body, mayChangeServing, ({ name, changed }) => announce({
      action: 'agent.update', outcome: 'success', resource: { type: 'agent', id: request.params.id }, details: { name, changed },
    })));
    // A raised limit or a new pool may let waiting transfers start.
    app.dispatcher.wake();
    const load = await app.agents.loadOf([doc._id]);
    return { data: presentAgent(doc, load.get(String(doc._id))!, app.agents.isOnline(doc)) };
  });

  /**
   * Approves a pending agent: from now on it serves connections not pinned to it, and their
   * credentials go to it. An administrator's act; audited `agent.approve`. Approving an approved
   * agent changes nothing. Revoking is DELETE.
   */
  app.post('/agents/:id/approve', {
    schema: { params: IdParams, response: { 200: Envelope(Agent) } },
    config: { access: { scope: 'agents:write' } },
  }, async (request) => {
    await administratorOnly(request, 'Approving an agent', 'agent.approve', request.params.id);
    const principal = principalOf(request);
    const doc = await app.audit.change(request, (announce) => app.agents.approve(principal.accountId, request.params.id, principal.actor, (agent) => announce({
      action: 'agent.approve', outcome: 'success', resource: { type: 'agent', id: String(agent._id) }, details: { name: agent.name, token_prefix: agent.token_prefix },
    })));
    // It may take waiting transfers and watchers now.
    app.dispatcher.wake();
    const load = await app.agents.loadOf([doc._id]);
    return { data: presentAgent(doc, load.get(String(doc._id))!, app.agents.isOnline(doc)) };
  });

  /**
   * Revokes at once: the token stops working (the agent is deleted), its running jobs fail, and
   * its socket is closed with `revoked` here, or within a poll interval by the instance holding it.
   */
  app.delete('/agents/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: { access: { scope: 'agents:write' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const doc = await app.agents.find(accountId, request.params.id);
    const id = String(doc._id);
    // Recorded before the token stops working; the jobs it fails are named in each job's error.
    await app.audit.change(request, async (announce) => {
      await announce({ action: 'agent.revoke', outcome: 'success', resource: { type: 'agent', id }, details: { name: doc.name, token_prefix: doc.token_prefix } });
      if (!(await app.agents.remove(doc))) throw agentNotFound(request.params.id);
    });
    app.agentHub.closeAgent(id, CloseCodes.revoked, 'agent revoked');
    app.dispatcher.wake();
    await app.transfers.failAllOfAgent(doc._id, `Agent ${doc.name} was revoked while the job was running`);
    return { data: { id, deleted: true as const } };
  });

  /** A `ping` round trip through the agent's socket, wherever it is connected. */
  app.post('/agents/:id/test', {
    schema: { params: IdParams, response: { 200: Envelope(TestResult) } },
    config: { access: { scope: 'agents:write' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const doc = await app.agents.find(accountId, request.params.id);
    if (!app.agents.isOnline(doc)) throw new ServiceUnavailableError(`Agent '${doc.name}' is offline`);
    const result = await app.agentRequests.call({ accountId, agentId: String(doc._id), kind: 'ping' }, app.dispatcher.stopping);
    await app.audit.recordRequest(request, {
      action: 'agent.test', outcome: result.success ? 'success' : 'failure',
      resource: { type: 'agent', id: String(doc._id) }, details: { name: doc.name, latency_ms: result.latency_ms },
    });
    return { data: result };
  });
};

export default agents;

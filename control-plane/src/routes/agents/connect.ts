import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { CloseCodes, Messages } from '@xfer/shared';
import type { AgentIdentity } from '../../plugins/app/agents/index.js';

const BEARER = /^Bearer +(\S+)$/i;

/**
 * `GET /api/v1/agents/connect`: the agent's WebSocket (shared/src/protocol/agent-protocol.ts).
 *
 * The route is public for the API's auth hook (agents are not API callers; the hook still counts
 * it against the per-address rate limit) and authenticates the `agt_` bearer token itself, before
 * the upgrade. A missing, unknown or revoked token gets the upgrade only to be closed at once
 * with `CloseCodes.revoked` (4401) and no frame: the same signal an agent gets when it is revoked
 * while connected, so agents handle one terminal case. A request without an upgrade gets 426.
 */
const connect: FastifyPluginAsync = async (app) => {
  const identities = new WeakMap<FastifyRequest, AgentIdentity>();

  app.route({
    method: 'GET',
    url: '/agents/connect',
    config: { access: { public: true } },
    preHandler: async (request) => {
      if (!request.ws) return;
      const token = BEARER.exec(request.headers.authorization ?? '')?.[1];
      const agent = token ? await app.agents.byToken(token) : null;
      if (agent) {
        identities.set(request, { id: String(agent._id), accountId: String(agent.account_id), name: agent.name });
        return;
      }
      // Counted like every refused credential (plugins/app/access/denial-tally.ts): a flood of bad tokens writes nothing per request.
      app.authDenials.add({
        action: 'agent.connect', accountId: null, actor: { type: 'agent', id: null }, route: 'GET /api/v1/agents/connect',
        ip: request.ip, reason: token ? 'unknown or revoked agent token' : 'no bearer token', status: 401,
      });
    },
    handler: async (_request, reply) =>
      reply.code(426).header('upgrade', 'websocket').send({ error: 'This endpoint accepts WebSocket connections from agents only' }),
    wsHandler: (socket, request) => {
      const identity = identities.get(request);
      if (!identity) return socket.close(CloseCodes.revoked, Messages.unauthenticated);
      app.agentHub.accept(socket, identity, request.ip);
    },
  });
};

export default connect;

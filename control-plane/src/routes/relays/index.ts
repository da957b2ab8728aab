import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { LINK_PATH, LinkCloseCodes, type LinkGrant } from '../../plugins/app/relay/index.js';

const BEARER = /^Bearer +(\S+)$/i;

/**
 * `GET /internal/relay-link`: the WebSocket a relay's host dials on the instance holding the
 * relay's source agent (docs/architecture.md "Relays", docs/security.md "Relay peer links").
 * Outside `/api/v1` and hidden from the OpenAPI document: instances use it, not API clients.
 * Public for the API's auth hook and not rate-limited (a busy pair of instances opens one link per
 * relay); the bearer token is an HMAC of the master key that every instance shares, checked with
 * the job's state before the upgrade: 401 for a forged, expired or reused token, 409 for a job
 * or agent that is not (any more) what the token names. Refusals are tallied like other refused
 * credentials; the token is never logged.
 */
const relayLink: FastifyPluginAsync = async (app) => {
  const grants = new WeakMap<FastifyRequest, LinkGrant>();

  app.route({
    method: 'GET',
    url: LINK_PATH,
    schema: { hide: true },
    config: { access: { public: true, unlimited: true } },
    preHandler: async (request, reply) => {
      if (!request.ws) return;
      const check = await app.relays.checkLink(BEARER.exec(request.headers.authorization ?? '')?.[1] ?? null);
      if (check.ok) {
        grants.set(request, check.grant);
        return;
      }
      if (check.status === 401) {
        app.authDenials.add({
          action: 'relay.link', accountId: null, actor: { type: 'system', id: null }, route: `GET ${LINK_PATH}`,
          ip: request.ip, reason: 'invalid relay link token', status: 401,
        });
      }
      return reply.code(check.status).send({ error: check.error });
    },
    handler: async (_request, reply) =>
      reply.code(426).header('upgrade', 'websocket').send({ error: 'This endpoint accepts WebSocket connections from other control-plane instances only' }),
    wsHandler: (socket, request) => {
      const grant = grants.get(request);
      if (!grant) return socket.close(LinkCloseCodes.protocolError, 'no relay link was granted');
      app.relays.acceptLink(socket, grant);
    },
  });
};

export default relayLink;

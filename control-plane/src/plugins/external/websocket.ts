import fp from 'fastify-plugin';
import fastifyWebsocket from '@fastify/websocket';
import { MAX_FRAME_BYTES } from '@xfer/shared';

/**
 * WebSocket upgrades for `GET /api/v1/agents/connect`. Frames above the protocol's limit close
 * the socket (1009). Sockets are closed by the agent hub at shutdown, with
 * `CloseCodes.goingAway` (plugins/app/dispatcher.ts), not by this plugin's default.
 */
export default fp(
  async (app) => {
    await app.register(fastifyWebsocket, {
      options: { maxPayload: MAX_FRAME_BYTES },
      preClose: (done) => done(),
    });
  },
  { name: 'websocket' },
);

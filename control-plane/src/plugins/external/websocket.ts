import fp from 'fastify-plugin';
import fastifyWebsocket from '@fastify/websocket';
import { MAX_FRAME_BYTES } from '@xfer/shared';

/**
 * WebSocket upgrades for `GET /api/v1/agents/connect`. Frames above the protocol's limit close
 * the socket (1009) before they are buffered whole. Text that is not UTF-8 is left to
 * `parseMessage`, so it closes with protocolError (4400) like every other bad frame instead of
 * ws's 1007. An error on a socket is logged and ends that socket only. Sockets are closed by the agent hub at shutdown, with
 * `CloseCodes.goingAway` (plugins/app/agents/dispatch.ts), not by this plugin's default.
 */
export default fp(
  async (app) => {
    await app.register(fastifyWebsocket, {
      options: { maxPayload: MAX_FRAME_BYTES, skipUTF8Validation: true },
      // ws closes a socket whose peer broke the framing (1009 for an oversized frame) and then
      // reports the error: let that close reach the agent, so it knows why; end other sockets now.
      errorHandler: (err, socket, request) => {
        // ws's own errors (WS_ERR_*) are the peer's doing; anything else thrown here is ours.
        const fromPeer = String((err as { code?: unknown }).code ?? '').startsWith('WS_ERR_');
        if (fromPeer) request.log.warn({ err: err.message }, 'agent socket closed for a framing error');
        else request.log.error({ err }, 'agent socket failed');
        if (socket.readyState !== socket.CLOSING) socket.terminate();
      },
      preClose: (done) => done(),
    });
  },
  { name: 'websocket' },
);

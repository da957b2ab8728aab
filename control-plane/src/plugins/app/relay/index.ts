import fp from 'fastify-plugin';
import { RelayService } from './relay.service.js';

export { RelayService, type LinkCheck, type LinkGrant } from './relay.service.js';
export { LINK_PATH, LinkCloseCodes } from './peer-link.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The relays of this instance: hosted (`start`) and served for other instances (`checkLink`, `acceptLink`). */
    relays: RelayService;
  }
}

/** The purpose peer-link HMAC keys are derived for (Vault.derivedKeys). */
export const LINK_KEY_PURPOSE = 'relay peer link v1';

/**
 * The relay domain (docs/architecture.md "Relays"): one RelayService, handed the relay traffic of
 * the agent hub's sessions (their welcome offers relays from then on), watching its relays' runs
 * once the app is ready, ending them at shutdown.
 */
export default fp(
  async (app) => {
    const relays = new RelayService({
      db: app.db,
      hub: app.agentHub,
      connections: app.connections,
      linkKeys: app.vault.derivedKeys(LINK_KEY_PURPOSE),
      isOnline: (doc) => app.agents.isOnline(doc),
      takeOver: (id, attempt, reason) => app.transfers.interrupt(id, attempt, reason),
      fail: (id, attempt, reason) => app.transfers.fail(id, attempt, reason),
      metrics: app.metrics,
      heartbeatMs: app.config.agentHeartbeatMs,
      pollMs: app.config.dispatchPollMs,
      log: app.log,
    });
    app.agentHub.routeRelays(relays);
    // Built after the gateway (it needs the hub): from now on the scheduler may choose relays.
    app.dispatcher.relayWith(relays);
    app.decorate('relays', relays);
    app.metrics.countRelaysWith(() => relays.stats());
    app.addHook('onReady', async () => relays.startWatching());
    // The relays end when closing begins (the dispatcher's signal), before the hub closes the
    // agents' sockets: their agents are told why, and the jobs are taken over.
    app.dispatcher.stopping.addEventListener('abort', () => relays.shutdown(), { once: true });
    app.addHook('preClose', () => relays.stop());
  },
  { name: 'relay', dependencies: ['agents', 'connections', 'transfers', 'metrics'] },
);

import fp from 'fastify-plugin';
import { Loop } from '../../../lib/loop.js';
import { PlansService } from './plans.service.js';

export { PlansService, presentItem, type StoredPlan } from './plans.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Plans of transfers (issue 25): computed by agents, stored, read, and paged to the run that applies one. */
    plans: PlansService;
  }
}

/**
 * The plans domain (plans.service.ts). Each instance sends `plan.assign` for the plans of the
 * agents whose sockets it holds (at once for a plan made here, by its loop for one made on another
 * instance), stores the frames those agents send (the hub's 'plan' event), and fails the plans of
 * an agent that disconnects mid-plan.
 */
export default fp(
  async (app) => {
    const plans = new PlansService({
      db: app.db, hub: app.agentHub, agents: app.agents, transfers: app.transfers, connections: app.connections,
      relays: () => app.dispatcher.relays, ttlMs: app.config.planTtlMs, pollMs: Math.max(100, app.config.dispatchPollMs), log: app.log,
    });
    const loop = new Loop(() => plans.pump(), Math.max(1_000, app.config.dispatchPollMs), (err) => app.log.warn({ err }, 'plans: a pass failed; retrying on the next pass'));
    app.agentHub.on('plan', (session, message) => plans.message(session, message));
    app.agentHub.on('ready', async () => loop.wake());
    app.agentHub.on('closed', (session) => plans.closed(session));
    app.decorate('plans', plans);
    app.addHook('onReady', async () => loop.start());
    app.addHook('preClose', () => loop.stop());
  },
  { name: 'plans', dependencies: ['mongoose', 'transfers', 'agents', 'connections'] },
);

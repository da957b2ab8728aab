import fp from 'fastify-plugin';
import { Loop } from '../../../lib/loop.js';
import { WatcherAssignments } from './assignments.js';
import { WatcherEvents } from './watcher-events.js';
import { WatchersService } from './watchers.service.js';

export { WatchersService, presentWatcher, type BeforeWrite } from './watchers.service.js';
export { WatcherAssignments, baselineOf } from './assignments.js';
export { WatcherEvents, foreignFile, PENDING_GRACE_MS, type StoredWatcher, type StoredWatcherEvent } from './watcher-events.js';

declare module 'fastify' {
  interface FastifyInstance {
    watchers: WatchersService;
    watcherAssignments: WatcherAssignments;
    watcherEvents: WatcherEvents;
  }
}

/** How often each instance tells its agents their watchers (a change made here wakes it at once). */
export const WATCHER_TELL_MS = 2_000;
/** How often each instance assigns agents to watchers that have none (or lost theirs), and starts events left pending. */
export const WATCHER_ASSIGN_MS = 5_000;

/**
 * The watchers domain (docs/automation.md "Watchers", docs/architecture.md "Watchers"): the
 * account's watchers and their events (`app.watchers`), which agent polls each and telling the
 * agents (`app.watcherAssignments`), and what the agents' reports do (`app.watcherEvents`), run
 * by a loop on every instance (started when the app is ready, stopped before it closes).
 */
export default fp(
  async (app) => {
    const assignments = new WatcherAssignments({ db: app.db, hub: app.agentHub, agents: app.agents, connections: app.connections, log: app.log });
    const events = new WatcherEvents({ db: app.db, transfers: app.transfers, workflowRuns: app.workflowRuns, audit: app.audit, wakeDispatcher: () => app.dispatcher.wake(), log: app.log });
    let lastAssign = 0;
    const loop = new Loop(async () => {
      if (Date.now() - lastAssign >= WATCHER_ASSIGN_MS) {
        lastAssign = Date.now();
        await assignments.assign();
        await events.sweepPending();
      }
      await assignments.tell();
    }, WATCHER_TELL_MS, (err) => app.log.warn({ err }, 'watchers: a pass failed; retrying on the next pass'));
    const changed = () => {
      lastAssign = 0;
      loop.wake();
    };
    // `ready` also follows every run's end: only a session not told yet (a new one) needs a pass.
    app.agentHub.on('ready', (session) => {
      if (!assignments.told(session)) changed();
    });
    app.agentHub.on('closed', async (session) => {
      assignments.forget(session);
      changed();
    });
    app.agentHub.on('watch', async (session, report) => {
      if (report.type === 'watch.found') await events.found(session, report.payload);
      else await assignments.polled(session, report.payload);
    });
    app.decorate('watchers', new WatchersService({
      db: app.db, parameters: app.parameters, transfers: app.transfers, workflows: app.workflows, workflowRuns: app.workflowRuns, changed,
    }));
    app.decorate('watcherAssignments', assignments);
    app.decorate('watcherEvents', events);
    app.addHook('onReady', async () => loop.start());
    app.addHook('preClose', () => loop.stop());
  },
  { name: 'watchers', dependencies: ['mongoose', 'audit', 'transfers', 'agents', 'connections', 'parameters', 'workflows'] },
);

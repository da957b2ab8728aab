import fp from 'fastify-plugin';
import { CloseCodes, type ConnectionSettings, type OverwritePolicy, type VerifyMode } from '@xfer/shared';
import { Loop } from '../../../lib/loop.js';
import { NotFoundError } from '../../../errors.js';
import { loadConnectionSettings } from '../connections/connections.service.js';
import type { Job } from '../transfers/transfer-states.js';

export interface Dispatcher {
  /** Runs the coordination loop now: the in-process shortcut after a change made here. */
  wake(): void;
  /** Aborted when the app starts closing: long waits (a blocking execute) end then. */
  readonly stopping: AbortSignal;
}

declare module 'fastify' {
  interface FastifyInstance {
    dispatcher: Dispatcher;
  }
}

/** How long shutdown waits for agent sockets to finish their closing handshake. */
const CLOSE_WAIT_MS = 2_000;

/**
 * The coordination loop of an instance, every `dispatchPollMs` and at once when woken: checks its
 * agent sessions (revoked, replaced, still alive), tells agents to stop runs that were cancelled,
 * sends `job.assign` for jobs started on any instance for its agents, sends pending agent
 * requests, renews the leases of its agents' jobs, and sweeps expired leases for everyone. All
 * coordination goes through the database, so any number of instances can run it side by side.
 */
export default fp(
  async (app) => {
    const { agentHub: hub, jobs, agentRequests, config } = app;
    const stopping = new AbortController();
    const renewEveryMs = Math.max(config.dispatchPollMs, Math.floor(config.jobLeaseMs / 3));
    const sweepEveryMs = Math.max(config.dispatchPollMs, Math.min(1_000, Math.floor(config.jobLeaseMs / 4)));
    let lastRenew = 0;
    let lastSweep = 0;
    /**
     * Lease clocks start again when an instance starts: while no instance was alive, no agent could
     * have reached one, so that time is no agent's silence. Leases are swept only once this instance
     * has been up a whole lease (its agents reconnect well within it: they cap their backoff to a
     * quarter of `welcome.lease_ms`); with other instances alive, they keep sweeping meanwhile.
     */
    let sweepFrom = Number.POSITIVE_INFINITY;

    async function settings(job: Job, which: 'source' | 'destination'): Promise<ConnectionSettings | null> {
      const id = String(which === 'source' ? job.source_connection_id : job.destination_connection_id);
      try {
        return await loadConnectionSettings(app.db, app.vault, job.account_id, id);
      } catch (err) {
        const error = err instanceof NotFoundError
          ? `The ${which} connection ${id} was deleted before the job could start`
          : `The ${which} connection ${id} could not be prepared: ${(err as Error).message}`;
        if (!(err instanceof NotFoundError)) app.log.error({ err, jobId: String(job._id) }, 'could not prepare a connection for an agent');
        await jobs.fail(job._id, job.attempt, error, { agent_id: job.agent_id });
        return null;
      }
    }

    /** Sends one claimed job to its agent. Decrypted credentials exist only in this frame. */
    async function assign(job: Job): Promise<void> {
      const id = String(job._id);
      const agentId = String(job.agent_id);
      const session = hub.get(agentId);
      if (!session) return jobs.unassign(id, agentId, job.attempt);
      const source = await settings(job, 'source');
      const destination = source && await settings(job, 'destination');
      if (!source || !destination) return;
      session.jobs.set(id, job.attempt);
      const sent = session.send('job.assign', {
        job_id: id,
        attempt: job.attempt,
        source,
        source_path: job.source_path,
        destination,
        destination_path: job.destination_path,
        options: { overwrite: job.options!.overwrite as OverwritePolicy, verify: job.options!.verify as VerifyMode, concurrency: job.options!.concurrency },
        resume: job.attempt > 1,
      });
      if (!sent) {
        session.jobs.delete(id);
        await jobs.unassign(id, agentId, job.attempt);
      }
    }

    async function step(name: string, fn: () => Promise<unknown>): Promise<void> {
      try {
        await fn();
      } catch (err) {
        app.log.warn({ err, step: name }, 'coordination step failed; retrying on the next tick');
      }
    }

    async function tick(): Promise<void> {
      await step('sessions', () => hub.sync());
      await step('cancels', () => hub.reconcileJobs());
      await step('dispatch', async () => {
        const agentIds = hub.openSessions().map((s) => s.agent.id);
        for (const job of await jobs.claimForDispatch(agentIds, hub.instanceId, hub.stoppingJobs())) await assign(job);
      });
      await step('requests', () => agentRequests.serve());
      const now = Date.now();
      if (now - lastRenew >= renewEveryMs) {
        lastRenew = now;
        await step('leases', () => jobs.renewLeases(hub.openSessions().map((s) => ({ id: s.agent.id, lastContact: s.lastHeardAt })), hub.instanceId));
      }
      if (now - lastSweep >= sweepEveryMs) {
        lastSweep = now;
        if (now >= sweepFrom) await step('sweep', () => jobs.expireLeases());
        await step('sweep-requests', () => agentRequests.sweep());
      }
    }

    const loop = new Loop(tick, config.dispatchPollMs, (err) => app.log.warn({ err }, 'coordination loop failed'));
    app.decorate<Dispatcher>('dispatcher', { wake: () => loop.wake(), stopping: stopping.signal });
    hub.onReady = () => loop.wake();

    app.addHook('onReady', async () => {
      sweepFrom = Date.now() + config.jobLeaseMs;
      loop.start();
    });
    // Jobs keep their leases: their agents reconnect to another instance and carry on.
    app.addHook('preClose', async () => {
      stopping.abort();
      await loop.stop();
      await hub.closeAll(CloseCodes.goingAway, 'server shutting down', CLOSE_WAIT_MS);
    });
  },
  { name: 'dispatcher', dependencies: ['mongoose', 'jobs', 'agent-hub', 'agent-requests'] },
);

import type { FastifyBaseLogger } from 'fastify';
import { CloseCodes, type ConnectionSettings, type OverwritePolicy, type VerifyMode } from '@xfer/shared';
import { Loop } from '../../../lib/loop.js';
import { NotFoundError } from '../../../errors.js';
import type { ConnectionsService } from '../connections/index.js';
import type { StoredTransfer, TransfersService } from '../transfers/index.js';
import type { AgentHub } from './hub.js';
import type { AgentRequests } from './requests.js';

/** How long shutdown waits for agent sockets to finish their closing handshake. */
const CLOSE_WAIT_MS = 2_000;

/** What the Dispatcher drives: built after the hub and the requests it serves (index.ts). */
export interface DispatcherOptions {
  hub: AgentHub;
  requests: AgentRequests;
  /** Claims the transfers to send, renews and sweeps their leases, fails those that cannot be sent. */
  transfers: TransfersService;
  /** Opens the connections of a job, only when it is sent. */
  connections: ConnectionsService;
  dispatchPollMs: number;
  leaseMs: number;
  log: FastifyBaseLogger;
}

/**
 * The coordination loop of an instance, every `dispatchPollMs` and at once when woken: checks its
 * agent sessions (revoked, replaced, still alive), tells agents to stop runs that were cancelled,
 * sends `job.assign` for jobs started on any instance for its agents, sends pending agent
 * requests, renews the leases of its agents' jobs, and sweeps expired leases for everyone. All
 * coordination goes through the database, so any number of instances can run it side by side.
 * It wakes up when the hub has a session ready and when a request is queued.
 */
export class Dispatcher {
  private readonly abort = new AbortController();
  /** Aborted when the app starts closing: long waits (a blocking execute) end then. */
  readonly stopping: AbortSignal = this.abort.signal;
  private readonly loop: Loop;
  private readonly renewEveryMs: number;
  private readonly sweepEveryMs: number;
  private lastRenew = 0;
  private lastSweep = 0;
  /**
   * Lease clocks start again when an instance starts: while no instance was alive, no agent could
   * have reached one, so that time is no agent's silence. Leases are swept only once this instance
   * has been up a whole lease (its agents reconnect well within it: they cap their backoff to a
   * quarter of `welcome.lease_ms`); with other instances alive, they keep sweeping meanwhile.
   */
  private sweepFrom = Number.POSITIVE_INFINITY;

  constructor(private readonly o: DispatcherOptions) {
    this.renewEveryMs = Math.max(o.dispatchPollMs, Math.floor(o.leaseMs / 3));
    this.sweepEveryMs = Math.max(o.dispatchPollMs, Math.min(1_000, Math.floor(o.leaseMs / 4)));
    this.loop = new Loop(() => this.tick(), o.dispatchPollMs, (err) => o.log.warn({ err }, 'coordination loop failed'));
    o.hub.on('ready', () => this.wake());
    o.requests.on('queued', () => this.wake());
  }

  /** Runs the coordination loop now: the in-process shortcut after a change made here. */
  wake(): void {
    this.loop.wake();
  }

  /** When the app is ready: the loop starts, and the lease clocks with it (see `sweepFrom`). */
  start(): void {
    this.sweepFrom = Date.now() + this.o.leaseMs;
    this.loop.start();
  }

  /** When the app closes. Jobs keep their leases: their agents reconnect to another instance and carry on. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.loop.stop();
    await this.o.hub.closeAll(CloseCodes.goingAway, 'server shutting down', CLOSE_WAIT_MS);
  }

  private async settings(job: StoredTransfer, which: 'source' | 'destination'): Promise<ConnectionSettings | null> {
    const id = String(which === 'source' ? job.source_connection_id : job.destination_connection_id);
    try {
      return await this.o.connections.loadSettings(job.account_id, id);
    } catch (err) {
      const error = err instanceof NotFoundError
        ? `The ${which} connection ${id} was deleted before the job could start`
        : `The ${which} connection ${id} could not be prepared: ${(err as Error).message}`;
      if (!(err instanceof NotFoundError)) this.o.log.error({ err, jobId: String(job._id) }, 'could not prepare a connection for an agent');
      await this.o.transfers.fail(job._id, job.attempt, error, { agent_id: job.agent_id });
      return null;
    }
  }

  /**
   * Sends one claimed transfer to its agent as a job (the protocol's word for one run of a
   * transfer: `job_id` is the transfer's id). Decrypted credentials exist only in this frame.
   */
  private async assign(job: StoredTransfer): Promise<void> {
    const { hub, transfers } = this.o;
    const id = String(job._id);
    const agentId = String(job.agent_id);
    const session = hub.get(agentId);
    if (!session) return transfers.unassign(id, agentId, job.attempt);
    const source = await this.settings(job, 'source');
    const destination = source && await this.settings(job, 'destination');
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
      await transfers.unassign(id, agentId, job.attempt);
    }
  }

  private async step(name: string, fn: () => Promise<unknown>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      this.o.log.warn({ err, step: name }, 'coordination step failed; retrying on the next tick');
    }
  }

  private async tick(): Promise<void> {
    const { hub, transfers, requests } = this.o;
    await this.step('sessions', () => hub.sync());
    await this.step('cancels', () => hub.reconcileJobs());
    await this.step('dispatch', async () => {
      const agentIds = hub.openSessions().map((s) => s.agent.id);
      for (const job of await transfers.claimForDispatch(agentIds, hub.instanceId, hub.stoppingJobs())) await this.assign(job);
    });
    await this.step('requests', () => requests.serve());
    const now = Date.now();
    if (now - this.lastRenew >= this.renewEveryMs) {
      this.lastRenew = now;
      await this.step('leases', () => transfers.renewLeases(hub.openSessions().map((s) => ({ id: s.agent.id, lastContact: s.lastHeardAt })), hub.instanceId));
    }
    if (now - this.lastSweep >= this.sweepEveryMs) {
      this.lastSweep = now;
      if (now >= this.sweepFrom) await this.step('sweep', () => transfers.expireLeases());
      await this.step('sweep-requests', () => requests.sweep());
    }
  }
}

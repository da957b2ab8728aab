import type { FastifyBaseLogger } from 'fastify';
import { Types } from 'mongoose';
import { CloseCodes, type ConnectionSettings, type ConnectionType } from '@xfer/shared';
import { Loop } from '../../../lib/loop.js';
import { ConflictError, NotFoundError } from '../../../errors.js';
import type { Models } from '../../../models/index.js';
import type { ConnectionsService } from '../connections/index.js';
import { jobOptions, type StoredTransfer, type TransfersService } from '../transfers/index.js';
import type { AgentsService } from './agents.service.js';
import type { AgentHub } from './hub.js';
import type { AgentRequests } from './requests.js';
import type { AgentSession } from './session.js';
import { Scheduler } from './scheduler.js';
import { serves, SERVES } from './eligibility.js';

/** How long shutdown waits for agent sockets to finish their closing handshake. */
const CLOSE_WAIT_MS = 2_000;
/** How often stale slots are swept (a slot's claim is followed by its start within moments). */
const SLOT_SWEEP_MS = 30_000;

/**
 * Sets up the forwarding of a relayed run (plugins/app/relay/, relay-protocol.ts): the dispatcher
 * calls `start` right after it sent the destination agent the relayed `job.assign` (no source
 * settings, `relay.source_type` set). `job` is the transfer as claimed for dispatch: `mode:
 * 'relay'`, `agent_id` the destination agent (whose session is `destination`, on this instance),
 * `source_agent_id` the source agent (its socket on this instance or another), `attempt` the run.
 * Both agents' slots are held already. A throw takes the run over (`TransfersService.interrupt`),
 * as does a relay that loses a side later (the starter calls `interrupt` itself then).
 */
export interface RelayStarter {
  start(job: StoredTransfer, destination: AgentSession): Promise<void>;
}

/** What the Dispatcher drives: built after the hub and the requests it serves (index.ts). */
export interface DispatcherOptions {
  db: Models;
  hub: AgentHub;
  requests: AgentRequests;
  /** Which agents may run what (the scheduler's choice, and the check before an assign). */
  agents: AgentsService;
  /** The queue and slots, starts, dispatch claims, leases, takeovers, and failures of transfers that cannot be sent. */
  transfers: TransfersService;
  /** Opens the connections of a job, only when it is sent. */
  connections: ConnectionsService;
  /**
   * Relays (plugins/app/relay/); without one, a transfer no one agent serves is never relayed.
   * The relay domain is built after the gateway (it needs the hub): it hands its starter over with
   * `Dispatcher.relayWith` instead.
   */
  relays?: RelayStarter;
  dispatchPollMs: number;
  leaseMs: number;
  /** A waiting transfer no agent could run fails after this long (XFER_JOB_ORPHAN_TIMEOUT). */
  orphanTimeoutMs: number;
  log: FastifyBaseLogger;
}

/**
 * The coordination loop of an instance, every `dispatchPollMs` and at once when woken: checks its
 * agent sessions (revoked, replaced, still alive), tells agents to stop runs that were cancelled
 * or taken over, starts waiting transfers on its agents' free slots (scheduler.ts), sends their
 * `job.assign`, sends pending agent requests, renews the leases of its agents' jobs, and sweeps
 * for everyone: expired leases (their runs are taken over), orphaned waiting transfers, stale
 * slots. All coordination goes through the database, so any number of instances can run it side
 * by side. It wakes up when the hub has a session ready and when a request is queued.
 */
export class Dispatcher {
  private readonly abort = new AbortController();
  /** Aborted when the app starts closing: long waits (a blocking execute) end then. */
  readonly stopping: AbortSignal = this.abort.signal;
  private readonly loop: Loop;
  private readonly renewEveryMs: number;
  private readonly sweepEveryMs: number;
  private readonly orphanEveryMs: number;
  private readonly scheduler: Scheduler;
  private relayStarter: RelayStarter | null;
  private lastRenew = 0;
  private lastSweep = 0;
  private lastOrphanSweep = 0;
  private lastSlotSweep = 0;
  /** Waiting transfers found without their queue entry on the last sweep (TransfersService.requeueLost). */
  private readonly missingEntries = new Set<string>();
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
    // The orphan clock is read ten times per timeout (at most every 10 s): a transfer fails within a tenth of it late.
    this.orphanEveryMs = Math.max(this.sweepEveryMs, Math.min(10_000, Math.floor(o.orphanTimeoutMs / 10)));
    this.relayStarter = o.relays ?? null;
    this.scheduler = new Scheduler({
      db: o.db, hub: o.hub, agents: o.agents, transfers: o.transfers, relays: () => this.relays, orphanTimeoutMs: o.orphanTimeoutMs, log: o.log,
    });
    this.loop = new Loop(() => this.tick(), o.dispatchPollMs, (err) => o.log.warn({ err }, 'coordination loop failed'));
    o.hub.on('ready', () => this.wake());
    o.requests.on('queued', () => this.wake());
  }

  /** This control plane relays transfers that no one agent serves (it has a RelayStarter). */
  get relays(): boolean {
    return this.relayStarter !== null;
  }

  /**
   * Sets the RelayStarter (the relay domain, once built; null: relay nothing). From the next
   * scheduling pass on, transfers no one agent serves are relayed (or, with null, refused).
   */
  relayWith(starter: RelayStarter | null): void {
    this.relayStarter = starter;
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
      return await this.o.connections.settingsFor(job.account_id, id, String(job.agent_id));
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
   * Whether the agent of `session` may still run `job` (its connections may have been pinned
   * elsewhere since it started): checked before credentials go out. A run it may not is taken over.
   */
  private async stillServes(job: StoredTransfer, session: AgentSession): Promise<boolean> {
    let connections;
    try {
      connections = await this.o.transfers.connectionsOf(job);
    } catch (err) {
      // A deleted connection: loading its settings fails the run, saying so.
      if (err instanceof ConflictError) return true;
      throw err;
    }
    const [source, destination] = connections;
    const agent = await this.o.db.agents.findById(session.agent.id, SERVES).lean();
    if (!agent) return false;
    const serving = job.mode === 'relay' ? [destination] : [source, destination];
    const lost = serving.find((c) => !serves(agent, c));
    if (!lost) return true;
    await this.o.transfers.interrupt(job._id, job.attempt, `Connection '${lost.name}' is no longer served by agent ${session.agent.name}`, { agent_id: job.agent_id });
    return false;
  }

  /**
   * Sends one claimed transfer to its agent as a job (the protocol's word for one run of a
   * transfer: `job_id` is the transfer's id). Decrypted credentials exist only in this frame. A
   * relayed run's frame carries the destination's settings alone (the source agent gets the
   * source's from the relay, `relay.source`), then the RelayStarter sets up the forwarding.
   */
  private async assign(job: StoredTransfer): Promise<void> {
    const { hub, transfers } = this.o;
    const id = String(job._id);
    const agentId = String(job.agent_id);
    const session = hub.get(agentId);
    if (!session) return transfers.unassign(id, agentId, job.attempt);
    const relayed = job.mode === 'relay';
    const starter = this.relayStarter;
    if (relayed && !starter) {
      await transfers.interrupt(job._id, job.attempt, 'This control plane cannot relay', { agent_id: job.agent_id });
      return;
    }
    if (!(await this.stillServes(job, session))) return;
    const source = relayed ? null : await this.settings(job, 'source');
    if (!relayed && !source) return;
    const destination = await this.settings(job, 'destination');
    if (!destination) return;
    const sourceType = relayed ? await this.sourceType(job) : null;
    if (relayed && !sourceType) return;
    session.jobs.set(id, job.attempt);
    const sent = session.send('job.assign', {
      job_id: id,
      attempt: job.attempt,
      ...(source ? { source } : {}),
      source_path: job.source_path,
      destination,
      destination_path: job.destination_path,
      options: jobOptions(job.options, job.plan_id),
      resume: job.attempt > 1,
      ...(job.plan_id ? { plan_id: String(job.plan_id) } : {}),
      ...(sourceType ? { relay: { source_type: sourceType } } : {}),
    });
    if (!sent) {
      session.jobs.delete(id);
      await transfers.unassign(id, agentId, job.attempt);
      return;
    }
    if (relayed) {
      try {
        // In the same turn as the send (no await between): the destination may grant credit as
        // soon as it reads the assign, and the relay must be registered by then.
        await starter!.start(job, session);
      } catch (err) {
        this.o.log.warn({ err, jobId: id }, 'a relay could not start: its run is taken over');
        await transfers.interrupt(job._id, job.attempt, `The relay could not start: ${(err as Error).message}`, { agent_id: job.agent_id });
      }
    }
  }

  /** A relayed run's source type (never its settings: those go to the source agent alone). */
  private async sourceType(job: StoredTransfer): Promise<ConnectionType | null> {
    const id = String(job.source_connection_id);
    const doc = await this.o.db.connections.findOne({ _id: new Types.ObjectId(id), account_id: job.account_id }, { type: 1 }).lean();
    if (doc) return doc.type as ConnectionType;
    await this.o.transfers.fail(job._id, job.attempt, `The source connection ${id} was deleted before the job could start`, { agent_id: job.agent_id });
    return null;
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
    await this.step('schedule', () => this.scheduler.run());
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
    if (now - this.lastOrphanSweep >= this.orphanEveryMs) {
      this.lastOrphanSweep = now;
      await this.step('sweep-orphans', () => this.scheduler.sweepOrphans());
    }
    if (now - this.lastSlotSweep >= SLOT_SWEEP_MS) {
      this.lastSlotSweep = now;
      await this.step('sweep-slots', async () => {
        const released = await transfers.sweepSlots();
        if (released > 0) this.o.log.warn({ released }, 'released job slots whose run had ended without releasing them');
      });
      await this.step('requeue-lost', () => transfers.requeueLost(this.missingEntries));
    }
  }
}

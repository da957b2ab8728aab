import type { FastifyBaseLogger } from 'fastify';
import { Types } from 'mongoose';
import type { Models } from '../../../models/index.js';
import { runConnection, type QueueEntry, type RunConnection, type TransfersService } from '../transfers/index.js';
import type { AgentsService } from './agents.service.js';
import type { AgentHub } from './hub.js';
import type { AgentSession } from './session.js';
import { chooseRun, effectiveSlots, type AgentFacts, type RunChoice } from './eligibility.js';

/** What the Scheduler needs (built by the Dispatcher, whose loop runs it). */
export interface SchedulerOptions {
  db: Models;
  hub: AgentHub;
  agents: AgentsService;
  transfers: TransfersService;
  /** Whether this control plane relays now (the dispatcher has a RelayStarter). */
  relays: () => boolean;
  /** A waiting transfer no agent could run fails after this long (XFER_JOB_ORPHAN_TIMEOUT). */
  orphanTimeoutMs: number;
  log: FastifyBaseLogger;
}

/** Entries of an account's queue read at once. */
const PAGE = 100;

/** An agent whose socket this instance holds, with the slots it has free in this pass. */
interface LocalAgent {
  facts: AgentFacts;
  session: AgentSession;
  limit: number;
  free: number;
}

const sameAgent = (a: { _id: Types.ObjectId }) => (b: { _id: Types.ObjectId }) => a._id.equals(b._id);

/**
 * Starts waiting transfers on agents with free slots (docs/architecture.md "Queue, slots, pools
 * and failover"), run by the coordination loop of each instance for the agents whose sockets it
 * holds: so each agent is scheduled by one instance, and a relay is started by the instance
 * holding its destination agent (which hosts the relay). Agents belong to one account, so each
 * account's queue is walked on its own, oldest first: a slot goes to the oldest waiting transfer
 * of its account that may use it, and no account's backlog is ever read while filling another
 * account's agents. What a pass reads is the queue of the accounts with free local slots.
 */
export class Scheduler {
  constructor(private readonly o: SchedulerOptions) {}

  /**
   * One pass: starts what the free slots of this instance's agents allow. Returns how many
   * started. With nothing waiting it costs one read of each local account's queue head; with
   * transfers waiting and no free slot, three small reads.
   */
  async run(): Promise<number> {
    const byAccount = new Map<string, AgentSession[]>();
    for (const s of this.o.hub.openSessions()) byAccount.set(s.agent.accountId, [...(byAccount.get(s.agent.accountId) ?? []), s]);
    let started = 0;
    for (const [accountId, sessions] of byAccount) {
      try {
        // Cheap checks first: is anything waiting, does a local agent have a free slot.
        if ((await this.o.transfers.queue.page(accountId, null, 1)).length === 0) continue;
        const local = await this.withFreeSlots(sessions);
        if (local.length > 0) started += await this.fill(accountId, local);
      } catch (err) {
        this.o.log.warn({ err, accountId }, 'scheduling an account\'s waiting transfers failed; retrying on the next pass');
      }
    }
    return started;
  }

  /** Of these local agents (one account's), those with a free slot now, and how many. */
  private async withFreeSlots(sessions: AgentSession[]): Promise<LocalAgent[]> {
    const ids = sessions.map((s) => new Types.ObjectId(s.agent.id));
    const docs = await this.o.db.agents.find({ _id: { $in: ids } }, { token_hash: 0 }).lean();
    const held = await this.o.transfers.slots.held(ids);
    const local: LocalAgent[] = [];
    for (const doc of docs) {
      const session = sessions.find((s) => s.agent.id === String(doc._id))!;
      const limit = effectiveSlots(doc);
      // Runs told to stop still occupy the agent until it reports their end: counting them keeps
      // it from refusing a new run as busy.
      const free = limit - held.get(String(doc._id))!.length - session.stopping.size;
      if (free > 0) local.push({ facts: { ...doc, online: true } as AgentFacts, session, limit, free });
    }
    return local;
  }

  /** Walks one account's queue, oldest first, until its local agents' free slots are taken or the queue ends. */
  private async fill(accountId: string, local: LocalAgent[]): Promise<number> {
    const agents = await this.o.agents.factsOf(accountId);
    // Agents whose socket is here are online whatever their last session refresh says.
    for (const a of agents) if (local.some((l) => l.facts._id.equals(a._id))) a.online = true;
    const now = new Date();
    const remoteRoom = new Map<string, number>();
    let started = 0;
    let page = await this.o.transfers.queue.page(accountId, null, PAGE);
    for (;;) {
      const connections = await this.connectionsOf(accountId, page);
      for (const entry of page) {
        const source = connections.get(String(entry.source_connection_id));
        const destination = connections.get(String(entry.destination_connection_id));
        // A deleted connection: the orphan sweep fails the transfer.
        if (!source || !destination) continue;
        // Taken over again not long ago: it waits out its backoff (queue-states.ts takeoverBackoffMs).
        if (entry.not_before && entry.not_before > now) continue;
        const choice = chooseRun(source, destination, agents, this.o.relays(), { sync: !!entry.needs_sync, direct: !!entry.direct_only });
        if (await this.tryStart(entry, choice, local, remoteRoom)) started++;
        if (local.every((l) => l.free <= 0)) return started;
      }
      if (page.length < PAGE) return started;
      page = await this.o.transfers.queue.page(accountId, page[page.length - 1]!, PAGE);
    }
  }

  /** The connections of these entries' transfers (one read per page). */
  private async connectionsOf(accountId: string, entries: QueueEntry[]): Promise<Map<string, RunConnection>> {
    if (entries.length === 0) return new Map();
    const ids = [...new Set(entries.flatMap((e) => [String(e.source_connection_id), String(e.destination_connection_id)]))].map((id) => new Types.ObjectId(id));
    const docs = await this.o.db.connections.find({ _id: { $in: ids }, account_id: new Types.ObjectId(accountId) }, { name: 1, type: 1, agent_id: 1, agent_pool: 1 }).lean();
    return new Map(docs.map((d) => [String(d._id), runConnection(d)]));
  }

  /** Starts `entry` on a local agent with a free slot that `choice` allows; false when none can take it now. */
  private async tryStart(entry: QueueEntry, choice: RunChoice, local: LocalAgent[], remoteRoom: Map<string, number>): Promise<boolean> {
    const instanceId = this.o.hub.instanceId;
    const mostFree = (a: LocalAgent, b: LocalAgent) => b.free - a.free;
    if (choice.mode === 'direct') {
      for (const agent of local.filter((l) => l.free > 0 && choice.agents.some(sameAgent(l.facts))).sort(mostFree)) {
        const result = await this.o.transfers.startWaiting(entry, { mode: 'direct', agent: { id: String(agent.facts._id), limit: agent.limit } }, instanceId);
        if (result.outcome === 'started') {
          agent.free--;
          return true;
        }
        if (result.outcome === 'gone') return false;
        agent.free = 0; // its slots are held after all (a relay's source side claimed from another instance)
      }
      return false;
    }
    if (choice.mode !== 'relay') return false;
    const destinations = local.filter((l) => l.free > 0 && choice.destinations.some(sameAgent(l.facts))).sort(mostFree);
    const sources = destinations.length > 0 ? await this.withRoom(choice.sources, local, remoteRoom) : [];
    for (const destination of destinations) {
      for (const source of sources) {
        const sourceId = String(source._id);
        const asLocal = local.find((l) => l.facts._id.equals(source._id));
        if ((asLocal ? asLocal.free : remoteRoom.get(sourceId)!) <= 0 || source._id.equals(destination.facts._id)) continue;
        const result = await this.o.transfers.startWaiting(entry, {
          mode: 'relay', agent: { id: String(destination.facts._id), limit: destination.limit }, source: { id: sourceId, limit: effectiveSlots(source) },
        }, instanceId);
        if (result.outcome === 'started') {
          destination.free--;
          if (asLocal) asLocal.free--;
          else remoteRoom.set(sourceId, remoteRoom.get(sourceId)! - 1);
          return true;
        }
        if (result.outcome === 'gone') return false;
        if (result.outcome === 'source-busy') {
          if (asLocal) asLocal.free = 0;
          else remoteRoom.set(sourceId, 0);
        }
        if (result.outcome === 'busy') {
          destination.free = 0;
          break;
        }
      }
    }
    // Not started in this pass (its other side is busy, or held by another instance): a local
    // agent that could play either side holds a slot back for it, as the oldest transfer that may
    // use it, instead of giving it to a younger one. Otherwise a relay could wait forever behind
    // direct work on busy agents. The instance holding the destination starts it once both sides
    // have room (held-back slots are not claimed, so they are room to that instance).
    for (const side of [choice.sources, choice.destinations]) {
      const mine = local.filter((l) => l.free > 0 && side.some(sameAgent(l.facts))).sort(mostFree)[0];
      if (mine) mine.free--;
    }
    return false;
  }

  /**
   * Relay sources with a free slot, most free first: a local agent's free slots as this pass
   * counts them, another instance's agent's as read once per pass (`remoteRoom`).
   */
  private async withRoom(sources: AgentFacts[], local: LocalAgent[], remoteRoom: Map<string, number>): Promise<AgentFacts[]> {
    const localFree = (a: AgentFacts) => local.find((l) => l.facts._id.equals(a._id))?.free;
    const unknown = sources.filter((s) => localFree(s) === undefined && !remoteRoom.has(String(s._id)));
    if (unknown.length > 0) {
      const held = await this.o.transfers.slots.held(unknown.map((s) => s._id));
      for (const s of unknown) remoteRoom.set(String(s._id), effectiveSlots(s) - held.get(String(s._id))!.length);
    }
    const room = (a: AgentFacts) => localFree(a) ?? remoteRoom.get(String(a._id))!;
    return sources.filter((s) => room(s) > 0).sort((a, b) => room(b) - room(a));
  }

  /**
   * The orphan sweep, run by every instance now and then: a waiting transfer that no online agent
   * (or relay pair) could run starts its orphan clock (`orphaned_since` on its entry; cleared when
   * one comes online), and fails once the clock reaches XFER_JOB_ORPHAN_TIMEOUT, with the reason.
   * One whose connection was deleted fails at once. Costs what the queue holds. Returns how many failed.
   */
  async sweepOrphans(now = new Date()): Promise<number> {
    const { transfers } = this.o;
    const entries = await transfers.queue.all();
    const byAccount = new Map<string, QueueEntry[]>();
    for (const e of entries) byAccount.set(String(e.account_id), [...(byAccount.get(String(e.account_id)) ?? []), e]);
    let failed = 0;
    for (const [accountId, waiting] of byAccount) {
      const agents = await this.o.agents.factsOf(accountId);
      const connections = await this.connectionsOf(accountId, waiting);
      for (const entry of waiting) {
        const source = connections.get(String(entry.source_connection_id));
        const destination = connections.get(String(entry.destination_connection_id));
        if (!source || !destination) {
          const which = source ? 'destination' : 'source';
          const id = String(source ? entry.destination_connection_id : entry.source_connection_id);
          if (await transfers.failWaiting(entry, `The ${which} connection ${id} of this transfer was deleted; it cannot run`)) failed++;
          continue;
        }
        const choice = chooseRun(source, destination, agents, this.o.relays(), { sync: !!entry.needs_sync, direct: !!entry.direct_only });
        if (choice.mode !== null) {
          if (entry.orphaned_since) await transfers.queue.setOrphanedSince(entry._id, entry.attempt, null);
          continue;
        }
        if (!entry.orphaned_since) {
          await transfers.queue.setOrphanedSince(entry._id, entry.attempt, now);
          continue;
        }
        const waited = now.getTime() - entry.orphaned_since.getTime();
        if (waited < this.o.orphanTimeoutMs) continue;
        const error = `${choice.problem.message}; no agent that could run it came online within ${Math.round(waited / 1000)} s (XFER_JOB_ORPHAN_TIMEOUT)`;
        if (await transfers.failWaiting(entry, error)) failed++;
      }
    }
    return failed;
  }
}

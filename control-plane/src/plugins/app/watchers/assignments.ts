import { Types } from 'mongoose';
import type { FastifyBaseLogger } from 'fastify';
import { MAX_WATCHERS_PER_AGENT, type AgentMessage, type AssignedWatcher, type ConnectionSettings } from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { AgentHub, AgentSession, AgentsService } from '../agents/index.js';
import { serves } from '../agents/index.js';
import type { ConnectionsService } from '../connections/index.js';
import { runConnection } from '../transfers/index.js';
import { watchFiltersOf, type StoredWatcher } from './watcher-events.js';

type Polled = Extract<AgentMessage, { type: 'watch.polled' }>['payload'];

/** How far before the last poll a new agent's first listing counts files as new: clocks of stores and instances differ. */
export const CLOCK_MARGIN_MS = 5 * 60_000;

export interface WatcherAssignmentsOptions {
  db: Models;
  hub: Pick<AgentHub, 'openSessions'>;
  agents: Pick<AgentsService, 'factsOf'>;
  connections: Pick<ConnectionsService, 'settingsFor'>;
  log: FastifyBaseLogger;
}

/**
 * Where a new agent's first listing of `watcher` ends its baseline (watch-protocol.ts
 * `report_since`): for a watcher polled before, a while before its last poll (its stable wait
 * and an interval, and the clock margin), files without a time counting as new (the control
 * plane drops the versions it has); for one never polled, its creation (a file written since is
 * new), unless it includes the existing files.
 */
export function baselineOf(w: Pick<StoredWatcher, 'last_poll_at' | 'created_at' | 'include_existing' | 'stable_seconds' | 'poll_interval_seconds'>) {
  if (w.last_poll_at) {
    const since = w.last_poll_at.getTime() - (w.stable_seconds + w.poll_interval_seconds) * 1000 - CLOCK_MARGIN_MS;
    return { report_since: new Date(since).toISOString(), report_undated: true };
  }
  if (w.include_existing) return {};
  // Down to the second: many stores keep whole-second times (sftp, FTP's MLSD, S3), so a file
  // written in the second of the create reads as older than the create's milliseconds; it counts as new.
  return { report_since: new Date(Math.floor(w.created_at.getTime() / 1000) * 1000).toISOString(), report_undated: false };
}

/**
 * Which agent polls each watcher, and telling the agents (docs/architecture.md "Watchers"). Every
 * instance runs `assign` (a watcher without an agent online that may poll it gets one: the
 * eligible agent with the fewest watchers, as for a transfer's connection: its `agent_id`, its
 * pool, or any agent of the account with the connector) and `tell` for the sessions it holds: a
 * session gets `watch.set`, the whole set of its watchers, after its welcome and whenever that
 * set changes. Two instances assigning one watcher at once both write; the last write stands and
 * the other agent is told to stop on the next pass. Meanwhile both may report a version: the
 * event's unique index acts on it once.
 */
export class WatcherAssignments {
  /** What each session was last told: a fingerprint of its set. */
  private readonly sent = new WeakMap<AgentSession, string>();
  /** Since when each session has been told to poll each of its watchers (a poll of it cannot have started before). */
  private readonly setAt = new WeakMap<AgentSession, Map<string, number>>();

  constructor(private readonly o: WatcherAssignmentsOptions) {}

  /** Whether the session has been told its watchers (a new session has not). */
  told(session: AgentSession): boolean {
    return this.sent.has(session);
  }

  /** Forgets what a closing session was told. */
  forget(session: AgentSession): void {
    this.sent.delete(session);
  }

  /**
   * Gives each active watcher an online agent that may poll it, keeping the one it has while that
   * one may; takes paused watchers from their agents. Costs the active watchers and their accounts' agents.
   */
  async assign(): Promise<void> {
    const { db } = this.o;
    // Read first: a pass with nothing to change writes nothing (reads stay free of writes, test/request-path.test.ts).
    const paused = await db.watchers.find({ active: false, agent_id: { $ne: null } }, { _id: 1 }).limit(1000).lean();
    if (paused.length > 0) await db.watchers.updateMany({ _id: { $in: paused.map((w) => w._id) }, active: false }, { $set: { agent_id: null } });
    const watchers = await db.watchers.find({ active: true }, { account_id: 1, connection_id: 1, agent_id: 1, last_error: 1 }).lean();
    const byAccount = new Map<string, typeof watchers>();
    for (const w of watchers) byAccount.set(String(w.account_id), [...(byAccount.get(String(w.account_id)) ?? []), w]);
    for (const [accountId, list] of byAccount) {
      const agents = (await this.o.agents.factsOf(accountId)).filter((a) => a.online && a.watch === true);
      const load = new Map<string, number>();
      for (const w of list) if (w.agent_id) load.set(String(w.agent_id), (load.get(String(w.agent_id)) ?? 0) + 1);
      const ids = [...new Set(list.map((w) => String(w.connection_id)))].map((id) => new Types.ObjectId(id));
      const connections = new Map((await db.connections.find({ _id: { $in: ids }, account_id: new Types.ObjectId(accountId) }, { name: 1, type: 1, agent_id: 1, agent_pool: 1 }).lean())
        .map((c) => [String(c._id), runConnection(c)]));
      for (const w of list) {
        const connection = connections.get(String(w.connection_id));
        const eligible = connection ? agents.filter((a) => serves(a, connection)) : [];
        if (w.agent_id && eligible.some((a) => a._id.equals(w.agent_id!))) continue;
        const room = eligible.filter((a) => (load.get(String(a._id)) ?? 0) < MAX_WATCHERS_PER_AGENT);
        const pick = room.sort((a, b) => (load.get(String(a._id)) ?? 0) - (load.get(String(b._id)) ?? 0))[0];
        if (w.agent_id) load.set(String(w.agent_id), (load.get(String(w.agent_id)) ?? 1) - 1);
        if (pick) load.set(String(pick._id), (load.get(String(pick._id)) ?? 0) + 1);
        const error = pick ? null : !connection ? 'Its connection was deleted'
          : eligible.length > 0 ? `Every agent that may poll ${connection.name} polls ${MAX_WATCHERS_PER_AGENT} watchers already`
            : `No online agent that polls watchers serves ${connection.name}; it is polled once one connects`;
        if (!pick && !w.agent_id && w.last_error === error) continue;
        const set: Record<string, unknown> = { agent_id: pick?._id ?? null };
        if (error) set.last_error = error;
        await db.watchers.updateOne({ _id: w._id, agent_id: w.agent_id ?? null }, { $set: set });
      }
    }
  }

  /** Sends `watch.set` to each session held here whose set of watchers changed since it was last told. */
  async tell(): Promise<void> {
    for (const session of this.o.hub.openSessions()) {
      if (session.hello?.watch !== true) continue;
      try {
        await this.tellOne(session);
      } catch (err) {
        this.o.log.warn({ err, agentId: session.agent.id }, 'telling an agent its watchers failed; retrying on the next pass');
      }
    }
  }

  private async tellOne(session: AgentSession): Promise<void> {
    const { db } = this.o;
    const watchers = await db.watchers.find({ agent_id: new Types.ObjectId(session.agent.id), active: true }).lean<StoredWatcher[]>();
    const mine = watchers.filter((w) => String(w.account_id) === session.agent.accountId);
    const connectionIds = [...new Set(mine.map((w) => String(w.connection_id)))];
    const stamps = await db.connections.find({ _id: { $in: connectionIds.map((id) => new Types.ObjectId(id)) } }, { updated_at: 1 }).lean();
    const stampOf = new Map(stamps.map((c) => [String(c._id), c.updated_at?.getTime() ?? 0]));
    const fingerprint = JSON.stringify(mine.map((w) => [String(w._id), w.revision, w.poll_interval_seconds, stampOf.get(String(w.connection_id)) ?? 0]).sort());
    if (this.sent.get(session) === fingerprint) return;
    const settings = new Map<string, ConnectionSettings>();
    const assigned: AssignedWatcher[] = [];
    for (const w of mine) {
      const id = String(w.connection_id);
      if (!settings.has(id)) {
        try {
          settings.set(id, await this.o.connections.settingsFor(session.agent.accountId, id, session.agent.id));
        } catch (err) {
          this.o.log.warn({ err, watcherId: String(w._id) }, 'a watcher\'s connection could not be loaded; it is left out of its agent\'s set');
          continue;
        }
      }
      assigned.push({
        id: String(w._id), revision: w.revision, connection: settings.get(id)!, poll_interval_seconds: w.poll_interval_seconds,
        spec: {
          path: w.path, pattern: w.pattern, recursive: w.recursive, stable_seconds: w.stable_seconds, include_existing: w.include_existing,
          ...watchFiltersOf(w),
        },
        ...baselineOf(w),
      });
    }
    const before = this.setAt.get(session);
    const now = Date.now();
    // Before the send: a poll's report can come back as soon as the agent has the frame.
    this.setAt.set(session, new Map(assigned.map((w) => [w.id, before?.get(w.id) ?? now])));
    session.send('watch.set', { watchers: assigned });
    this.sent.set(session, fingerprint);
  }

  /**
   * Records how a poll went, when it came from the watcher's agent now and of its current
   * revision. The poll is dated its end less its duration, never before this session was given
   * the watcher: `last_poll_at` is where the next agent's baseline ends (baselineOf), and an agent
   * saying it polled for a day must not have the files of that day reported again after a hand-over.
   */
  async polled(session: AgentSession, p: Polled): Promise<void> {
    const given = this.setAt.get(session)?.get(p.watcher_id);
    if (given === undefined) return; // not a watcher this session was told to poll
    const filter = {
      _id: new Types.ObjectId(p.watcher_id), account_id: new Types.ObjectId(session.agent.accountId),
      agent_id: new Types.ObjectId(session.agent.id), revision: p.revision,
    };
    const set = p.error
      ? { last_error: p.error }
      : { last_poll_at: new Date(Math.max(Date.now() - p.duration_ms, given)), last_error: null };
    await this.o.db.watchers.updateOne(filter, { $set: set });
  }
}

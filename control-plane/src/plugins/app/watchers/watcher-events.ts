import { Types } from 'mongoose';
import type { FastifyBaseLogger } from 'fastify';
import {
  basePathProblem, checkFilterOptions, CloseCodes, compileFilters, compileNamePattern, type AgentMessage, type FileFilter, type FilterOptions,
  type FoundFile, type TransferOptionsInput, type WatcherEvent, type WatcherEventStatus,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { WatcherDoc } from '../../../models/watcher.model.js';
import type { WatcherEventDoc } from '../../../models/watcher-event.model.js';
import type { StoredTransfer, TransferOutcome, TransfersService } from '../transfers/index.js';
import type { WorkflowRuns } from '../workflows/index.js';
import { ownerAuthorityProblem, type AuditService } from '../access/index.js';
import { serves, SERVES, type AgentSession } from '../agents/index.js';
import { runConnection } from '../transfers/index.js';
import { AppError } from '../../../errors.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';
import { Literal } from '../../../lib/templates.js';

export type StoredWatcher = WatcherDoc & { _id: Types.ObjectId };
export type StoredWatcherEvent = WatcherEventDoc & { _id: Types.ObjectId };
type Found = Extract<AgentMessage, { type: 'watch.found' }>['payload'];

/** An event still `pending` this long after it was seen was left by an instance that stopped before starting its action: the sweep starts it. */
export const PENDING_GRACE_MS = 60_000;

/** The status an event shows: its transfer's (or workflow run's, `running` shown as `in-progress`) while it has one, else what became of it. */
export function eventStatus(e: Pick<StoredWatcherEvent, 'state' | 'error' | 'transfer_id' | 'workflow_run_id'>, transfer: TransferOutcome | null): { status: WatcherEventStatus; error: string | null } {
  if (e.state === 'pending') return { status: 'pending', error: null };
  if (e.state === 'failed') return { status: 'failed', error: e.error ?? null };
  if (!transfer) {
    return { status: 'unknown', error: e.workflow_run_id ? `its workflow run ${String(e.workflow_run_id)} was deleted` : `its transfer ${String(e.transfer_id)} was deleted` };
  }
  return { status: transfer.status, error: transfer.status === 'failed' ? transfer.error ?? null : null };
}

export function presentEvent(e: StoredWatcherEvent, transfer: TransferOutcome | null): WatcherEvent {
  const { status, error } = eventStatus(e, transfer);
  return {
    id: String(e._id),
    watcher_id: String(e.watcher_id),
    path: e.path,
    size: e.size,
    modified_at: e.modified_at ? e.modified_at.toISOString() : null,
    version: e.version,
    seen_at: e.seen_at.toISOString(),
    action_status: status,
    transfer_id: e.transfer_id ? String(e.transfer_id) : null,
    workflow_run_id: e.workflow_run_id ? String(e.workflow_run_id) : null,
    error,
  };
}

/**
 * Why a reported file cannot be one of this watcher's: not a plain relative path (absolute,
 * empty, `.` or `..` segments, NUL or control characters, backslashes: basePathProblem's rules for
 * any path, shared/src/schemas/connections.ts), outside its folder (or below it when it is not
 * recursive), or a name that does not match its pattern. Null when it can. The agent is checked
 * to serve the connection; this keeps even such an agent from making the watcher's action copy a
 * file the watcher does not watch (docs/security.md "Templates: data is never code").
 */
export function foreignFile(watcher: Pick<StoredWatcher, 'path' | 'pattern' | 'recursive' | 'transfer'>, file: FoundFile): string | null {
  const problem = basePathProblem(`/${file.path}`);
  if (problem) return `its ${problem}`;
  const base = watcher.path.replace(/^\/+|\/+$/g, '');
  const segments = file.path.split('/');
  if (segments.some((s) => s === '' || s === '.')) return 'its path is absolute or has an empty or "." segment';
  const below = base === '' ? segments : file.path.startsWith(`${base}/`) ? file.path.slice(base.length + 1).split('/') : null;
  if (!below) return `it is not below ${watcher.path}`;
  if (!watcher.recursive && below.length !== 1) return `it is in a sub-folder of ${watcher.path}, which is not watched recursively`;
  const name = segments[segments.length - 1]!;
  if (file.name !== name) return 'its name is not the last segment of its path';
  if (!compileNamePattern(watcher.pattern)(name)) return `its name does not match ${watcher.pattern}`;
  const { filters } = watchFiltersOf(watcher);
  if (filters) {
    if (checkFilterOptions(filters)) return 'the watcher\'s filters are not valid';
    // The rules and sizes, as the agent applied them (ages depend on when it polled: not checked here).
    const filter = compiledFilters({ ...filters, min_age: undefined, max_age: undefined });
    const rel = below.join('/');
    const excluded = !filter.includeFile(rel, file.size)
      || below.slice(0, -1).some((_, i) => !filter.includeDirectory(below.slice(0, i + 1).join('/')));
    if (excluded) return 'the watcher\'s filters exclude it';
  }
  return null;
}

/**
 * The `filters` of a watcher's transfer options, which also decide which files the watcher
 * reports (watch-protocol.ts `WatchSpec.filters`; docs/api.md "Filters"), as a spread for the spec.
 */
export function watchFiltersOf(watcher: Pick<StoredWatcher, 'transfer'>): { filters?: FilterOptions } {
  const filters = (watcher.transfer?.options as { filters?: FilterOptions } | undefined)?.filters;
  return filters ? { filters } : {};
}

/** Compiled filters of the last few watchers (reports come in frames of up to MAX_FOUND_PER_REPORT files of one watcher). */
const compiledCache = new Map<string, FileFilter>();
function compiledFilters(filters: FilterOptions): FileFilter {
  const key = JSON.stringify(filters);
  let filter = compiledCache.get(key);
  if (!filter) {
    filter = compileFilters(filters, new Date());
    if (compiledCache.size >= 32) compiledCache.delete(compiledCache.keys().next().value!);
    compiledCache.set(key, filter);
  }
  return filter;
}

/**
 * What one agent session may report of one watcher (docs/agent.md "Watching a folder"): a
 * `watch.found` carries at most MAX_FOUND_PER_REPORT versions, and the frames of a session are
 * a token bucket of FOUND_BURST versions refilled at FOUND_PER_SECOND. Far above a real poll's
 * output (a folder of 20,000 new files goes through at once, and 720,000 an hour), far below what
 * would let one agent fill the events and the transfer queue.
 */
export const FOUND_BURST = 20_000;
export const FOUND_PER_SECOND = 200;

/** The versions a session may still report of a watcher now: FOUND_BURST, refilled at FOUND_PER_SECOND. */
class FoundBudget {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  /** Takes `n` from the watcher's bucket; false (nothing taken) when it holds fewer. */
  take(watcherId: string, n: number, now = Date.now()): boolean {
    const b = this.buckets.get(watcherId) ?? { tokens: FOUND_BURST, at: now };
    b.tokens = Math.min(FOUND_BURST, b.tokens + ((now - b.at) / 1000) * FOUND_PER_SECOND);
    b.at = now;
    this.buckets.set(watcherId, b);
    if (b.tokens < n) return false;
    b.tokens -= n;
    return true;
  }
}

export interface WatcherEventsOptions {
  db: Models;
  transfers: Pick<TransfersService, 'create' | 'enqueue'>;
  /** Starts the run of a watcher's workflow (plugins/app/workflows/). */
  workflowRuns: Pick<WorkflowRuns, 'startOf'>;
  audit: Pick<AuditService, 'record'>;
  /** Tells this instance's dispatcher that a transfer waits (the others find it on their own). */
  wakeDispatcher: () => void;
  log: FastifyBaseLogger;
}

/**
 * What the agents' watcher reports do (docs/architecture.md "Watchers"): each new file version
 * becomes an event, claimed by its insert (unique `{watcher_id, path, version}`), and the event
 * starts the watcher's action once. A report is acknowledged once its events are stored, so an
 * agent re-sends what a crash lost and nothing twice takes effect.
 */
export class WatcherEvents {
  /** What each session may still report, per watcher (FOUND_BURST); goes with the session. */
  private readonly budgets = new WeakMap<AgentSession, FoundBudget>();
  /** Reported versions refused since this instance started: over the rate, or not a file of the watcher (logged each time). */
  refused = 0;

  constructor(private readonly o: WatcherEventsOptions) {}

  /**
   * Applies a `watch.found` of `session`'s agent, then acknowledges it. A report past the
   * session's rate for the watcher is refused whole, not acknowledged, and the session closed as
   * for any frame out of bounds (4400): nothing of it is recorded, and the agent, which holds
   * what was not acknowledged, re-sends it after it reconnects, at a pace the control plane sets.
   */
  async found(session: AgentSession, payload: Found): Promise<void> {
    const watcher = await this.o.db.watchers.findById(payload.watcher_id).lean<StoredWatcher>();
    const refused = watcher ? await this.refusal(session, watcher) : 'the watcher no longer exists';
    if (refused || !watcher) {
      // Not a protocol error: a report held across a delete or a hand-over is normal. Dropped, and said so.
      this.o.log.info({ agentId: session.agent.id, watcherId: payload.watcher_id, files: payload.files.length, reason: refused }, 'watcher report dropped');
    } else {
      let budget = this.budgets.get(session);
      if (!budget) this.budgets.set(session, (budget = new FoundBudget()));
      if (!budget.take(payload.watcher_id, payload.files.length)) {
        this.refused += payload.files.length;
        this.o.log.warn({ agentId: session.agent.id, watcherId: payload.watcher_id, files: payload.files.length, refused: this.refused }, 'watcher report over the rate refused; session closed');
        return session.close(CloseCodes.protocolError, `watch.found over ${FOUND_PER_SECOND} file versions a second (burst ${FOUND_BURST}) for watcher ${payload.watcher_id}`);
      }
      // The owner's authority is read once for the whole report (its files fire together).
      let authority: Promise<string | null> | undefined;
      const ownerCheck = () => (authority ??= this.ownerProblem(watcher));
      for (const file of payload.files) await this.record(session, watcher, file, ownerCheck);
    }
    if (payload.seq !== undefined) session.send('ack', { seqs: [payload.seq] });
  }

  /** Why this agent's reports of this watcher are not taken; null when they are. */
  private async refusal(session: AgentSession, watcher: StoredWatcher): Promise<string | null> {
    if (String(watcher.account_id) !== session.agent.accountId) return 'the watcher is another account\'s';
    if (!watcher.active) return 'the watcher is paused';
    if (watcher.agent_id && String(watcher.agent_id) === session.agent.id) return null;
    // A hand-over: the previous agent's held reports are taken if it still may serve the connection.
    const [agent, connection] = await Promise.all([
      this.o.db.agents.findById(session.agent.id, SERVES).lean(),
      this.o.db.connections.findOne({ _id: watcher.connection_id, account_id: watcher.account_id }, { name: 1, type: 1, agent_id: 1, agent_pool: 1 }).lean(),
    ]);
    if (!agent || !connection) return 'the agent or the watcher\'s connection no longer exists';
    return serves({ ...agent, _id: agent._id }, runConnection(connection)) ? null : 'the agent does not serve the watcher\'s connection';
  }

  /**
   * Why the watcher's owner may no longer run its action (docs/security.md "Escalation rules"):
   * it runs with the authority of whoever last saved it, checked each time it fires.
   */
  private ownerProblem(watcher: StoredWatcher): Promise<string | null> {
    return ownerAuthorityProblem(this.o.db, watcher.account_id, watcher.owner, { runsWorkflow: Boolean(watcher.workflow_id) }, `PUT /watchers/${String(watcher._id)}`);
  }

  private async record(session: AgentSession, watcher: StoredWatcher, file: FoundFile, ownerCheck: () => Promise<string | null>): Promise<void> {
    const foreign = foreignFile(watcher, file);
    if (foreign) {
      this.refused++;
      // The path as a JSON string: its control characters escaped, never written raw to a log line.
      this.o.log.warn({ agentId: session.agent.id, watcherId: String(watcher._id), path: JSON.stringify(file.path.slice(0, 512)), reason: foreign, refused: this.refused }, 'watcher report of a file it does not watch dropped');
      return;
    }
    const modified = file.modified_at ? new Date(file.modified_at) : null;
    const event = {
      _id: new Types.ObjectId(), watcher_id: watcher._id, account_id: watcher.account_id, path: file.path, version: file.version,
      size: file.size, modified_at: modified && !Number.isNaN(modified.getTime()) ? modified : null, agent_id: new Types.ObjectId(session.agent.id),
      seen_at: new Date(), state: 'pending', transfer_id: null, workflow_run_id: null, error: null,
    };
    try {
      await this.o.db.watcherEvents.collection.insertOne(event);
    } catch (err) {
      if (isDuplicateKey(err)) return; // this version was acted on already
      throw err;
    }
    await this.start(watcher, event as StoredWatcherEvent, ownerCheck);
  }

  /**
   * Starts an event's action and records how it went. Safe to repeat (the sweep does, for events
   * an instance left `pending`): the transfer's id (or the workflow run's) is the event's, so a
   * second start finds the first's. An owner that lost the authority to run it (`ownerCheck`)
   * fails the event, saying so, and the audit record is `denied`.
   */
  async start(watcher: StoredWatcher, event: StoredWatcherEvent, ownerCheck = () => this.ownerProblem(watcher)): Promise<void> {
    let set: Pick<StoredWatcherEvent, 'state' | 'error' | 'transfer_id' | 'workflow_run_id'>;
    let job: StoredTransfer | null = null;
    const refused = await ownerCheck();
    try {
      if (refused) {
        set = { state: 'failed', error: `The watcher did not act: ${refused}`, transfer_id: null, workflow_run_id: null };
      } else if (watcher.workflow_id) {
        const name = event.path.slice(event.path.lastIndexOf('/') + 1);
        const run = await this.o.workflowRuns.startOf(watcher.account_id, watcher.workflow_id, {
          id: event._id, trigger: { type: 'watcher', id: watcher._id }, file: { name, path: event.path }, now: event.seen_at,
        });
        set = { state: 'started', error: null, transfer_id: null, workflow_run_id: run._id };
      } else {
        job = await this.transferOf(watcher, event);
        set = { state: 'started', error: null, transfer_id: job._id, workflow_run_id: null };
      }
    } catch (err) {
      // A 4xx is the event's own problem (a connection deleted, a parameter gone or made secret):
      // the event fails saying so. Anything else is the server's: logged, not shown.
      if (!(err instanceof AppError) || err.statusCode >= 500) {
        this.o.log.error({ err, watcherId: String(watcher._id), eventId: String(event._id) }, 'watcher action could not be started');
      }
      const error = err instanceof AppError && err.statusCode < 500 ? err.message : 'the action could not be started (an internal error, logged by the server)';
      set = { state: 'failed', error, transfer_id: null, workflow_run_id: null };
    }
    await this.o.db.watcherEvents.updateOne({ _id: event._id, state: 'pending' }, { $set: set });
    if (job && await this.o.transfers.enqueue(job)) this.o.wakeDispatcher();
    await this.o.audit.record({
      accountId: watcher.account_id, actor: { type: 'system', id: null }, action: 'watcher.trigger',
      resource: { type: 'watcher', id: String(watcher._id) }, outcome: refused ? 'denied' : set.state === 'failed' ? 'failure' : 'success',
      details: {
        name: watcher.name, event_id: String(event._id), path: event.path, version: event.version,
        transfer_id: set.transfer_id ? String(set.transfer_id) : null,
        ...(set.workflow_run_id ? { workflow_run_id: String(set.workflow_run_id) } : {}), ...(set.error ? { error: set.error } : {}),
        ...(refused ? { reason: 'owner authority' } : {}),
      },
    });
  }

  /** The event's transfer: created with the event's id, or the one an earlier start created. */
  private async transferOf(watcher: StoredWatcher, event: StoredWatcherEvent): Promise<StoredTransfer> {
    const t = watcher.transfer!;
    const name = event.path.slice(event.path.lastIndexOf('/') + 1);
    try {
      return await this.o.transfers.create(watcher.account_id, {
        name: `${watcher.name}: ${name}`.slice(0, 200),
        sourceConnectionId: String(watcher.connection_id),
        // The found file's path is data an agent reported (a name anyone who may write to the
        // folder chose): a Literal, never rendered (docs/security.md "Templates: data is never code").
        sourcePath: new Literal(`/${event.path}`),
        destinationConnectionId: String(t.destination_connection_id),
        destinationPath: t.destination_path,
        options: t.options as TransferOptionsInput,
      }, { id: event._id, now: event.seen_at, runId: String(event._id), file: { name, path: event.path }, fieldPrefix: 'action.transfer.' });
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
      const existing = await this.o.db.transfers.findById(event._id).lean<StoredTransfer>();
      if (!existing) throw err;
      return existing;
    }
  }

  /**
   * Starts the events an instance left `pending` (it stopped between the claim and the start).
   * Costs the pending events, never the history. Returns how many it started.
   */
  async sweepPending(now = new Date()): Promise<number> {
    const left = await this.o.db.watcherEvents.find({ state: 'pending', seen_at: { $lt: new Date(now.getTime() - PENDING_GRACE_MS) } })
      .limit(500).lean<StoredWatcherEvent[]>();
    let started = 0;
    for (const event of left) {
      const watcher = await this.o.db.watchers.findById(event.watcher_id).lean<StoredWatcher>();
      if (!watcher) continue; // deleted: its events go with it
      await this.start(watcher, event);
      started++;
    }
    return started;
  }
}

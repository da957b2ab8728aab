import { Types } from 'mongoose';
import {
  basePathProblem, compileNamePattern, DEFAULT_POLL_INTERVAL_SECONDS, DEFAULT_STABLE_SECONDS,
  MAX_POLL_INTERVAL_SECONDS, MIN_POLL_INTERVAL_SECONDS, NamePatternError,
  type CreateWatcherRequest, type ListWatcherEventsQuery, type ListWatchersQuery, type Page, type UpdateWatcherRequest,
  type Watcher, type WatcherActionInput, type WatcherEvent,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { ParametersService } from '../parameters/index.js';
import { BadRequestError, NotFoundError } from '../../../errors.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import { presentedOptions, storedOptions, type TransfersService } from '../transfers/index.js';
import type { WorkflowRuns, WorkflowsService } from '../workflows/index.js';
import { ownedConnectionId } from '../connections/index.js';
import { presentOwner, type StoredOwner } from '../access/index.js';
import { presentEvent, watchFiltersOf, type StoredWatcher, type StoredWatcherEvent } from './watcher-events.js';

type AccountId = string | Types.ObjectId;

/** Called with what the audit record names after the checks, right before the write (audit.service.ts `change`). */
export type BeforeWrite = (id: string, details: Record<string, unknown>) => Promise<void>;
const noAnnouncement: BeforeWrite = async () => {};

export interface WatchersServiceOptions {
  db: Models;
  parameters: Pick<ParametersService, 'checkTemplate'>;
  transfers: Pick<TransfersService, 'outcomes'>;
  /** Checks an `action.workflowId`. */
  workflows: Pick<WorkflowsService, 'checkReference'>;
  /** What the workflow runs of events became. */
  workflowRuns: Pick<WorkflowRuns, 'outcomes'>;
  /** Tells this instance's assignment loop that watchers changed (the others notice on their own). */
  changed: () => void;
}

/** The most a stable_seconds may be (a day), as the agent's poller takes it. */
const MAX_STABLE_SECONDS = 86_400;
/** The fields whose change makes an agent start the watcher over (a new revision). */
const WATCHED = ['connectionId', 'path', 'pattern', 'recursive', 'stable_seconds', 'include_existing'] as const;

const watcherNotFound = (id: string) => new NotFoundError(`Watcher ${id} not found`);

/** The read shape of a watcher. */
export function presentWatcher(doc: StoredWatcher): Watcher {
  const t = doc.transfer;
  return {
    id: String(doc._id),
    name: doc.name,
    connectionId: String(doc.connection_id),
    path: doc.path,
    pattern: doc.pattern,
    recursive: doc.recursive,
    poll_interval_seconds: doc.poll_interval_seconds,
    stable_seconds: doc.stable_seconds,
    include_existing: doc.include_existing,
    active: doc.active,
    action: {
      transfer: t ? { destinationConnectionId: String(t.destination_connection_id), destinationPath: t.destination_path, options: presentedOptions(t.options) } : null,
      workflowId: doc.workflow_id ? String(doc.workflow_id) : null,
    },
    owner: presentOwner(doc.owner),
    agent_id: doc.agent_id ? String(doc.agent_id) : null,
    last_poll_at: doc.last_poll_at ? doc.last_poll_at.toISOString() : null,
    last_error: doc.last_error ?? null,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
  };
}

/** What an audit record says about a watcher: what it watches and where its files go (never a parameter's value). */
function auditDetails(doc: Pick<StoredWatcher, 'name' | 'connection_id' | 'path' | 'pattern' | 'recursive' | 'active' | 'transfer' | 'workflow_id'>): Record<string, unknown> {
  return {
    name: doc.name, connection_id: String(doc.connection_id), path: doc.path, pattern: doc.pattern, recursive: doc.recursive, active: doc.active,
    ...(doc.workflow_id ? { workflow_id: String(doc.workflow_id) } : {}),
    ...(doc.transfer ? { destination_connection_id: String(doc.transfer.destination_connection_id), destination_path: doc.transfer.destination_path } : {}),
  };
}

/**
 * A watcher's transfer options, checked and with their defaults (docs/api.md "Sync, move and
 * plans"): each of its transfers copies the one file it found, so `sync` would delete every other
 * file of the destination folder; it is refused (`copy` or `move` instead).
 */
function watcherOptions(options: Parameters<typeof storedOptions>[0]) {
  if (options?.mode === 'sync') {
    throw new BadRequestError('action.transfer.options.mode sync is not available to a watcher: each of its transfers copies one found file, and a sync would delete the other files of the destination; use copy or move');
  }
  return storedOptions(options, 'action.transfer.options');
}

/**
 * An account's watchers and their events (`app.watchers`; docs/automation.md "Watchers"). Every
 * query is scoped to the account: an unknown id, a malformed one and another account's are the
 * same 404. Which agent polls a watcher is assignments.ts; what its reports do is watcher-events.ts.
 */
export class WatchersService {
  constructor(private readonly o: WatchersServiceOptions) {}

  async list(accountId: AccountId, query: ListWatchersQuery): Promise<Page<Watcher>> {
    const page = await paginate(this.o.db.watchers, { account_id: accountId }, query, (doc) => doc as StoredWatcher);
    return { data: page.data.map(presentWatcher), next_cursor: page.next_cursor };
  }

  async get(accountId: AccountId, id: string): Promise<Watcher> {
    return presentWatcher(await this.find(accountId, id));
  }

  /** The stored watcher of the caller, or 404 for unknown, malformed and other accounts' ids alike. */
  async find(accountId: AccountId, id: string): Promise<StoredWatcher> {
    const _id = toObjectId(id);
    // By _id alone (FerretDB pushes only that down), the account checked here.
    const doc = _id && await this.o.db.watchers.findById(_id).lean<StoredWatcher>();
    if (!doc || String(doc.account_id) !== String(accountId)) throw watcherNotFound(id);
    return doc;
  }

  /**
   * Creates a watcher after every check (400 naming the field). It waits for an agent that may
   * poll its connection. `owner` is the caller, whose authority it runs with (watcher-events.ts checks it on each file).
   */
  async create(accountId: AccountId, owner: StoredOwner, input: CreateWatcherRequest, beforeWrite: BeforeWrite = noAnnouncement): Promise<Watcher> {
    const fields = await this.checked(accountId, input, true);
    const now = new Date();
    const doc = {
      _id: new Types.ObjectId(), account_id: new Types.ObjectId(String(accountId)), name: input.name.trim(),
      connection_id: fields.connection_id!, path: input.path, pattern: input.pattern ?? '*', recursive: input.recursive ?? false,
      poll_interval_seconds: input.poll_interval_seconds ?? DEFAULT_POLL_INTERVAL_SECONDS,
      stable_seconds: input.stable_seconds ?? DEFAULT_STABLE_SECONDS,
      include_existing: input.include_existing ?? false, active: input.active ?? true,
      transfer: fields.action!.transfer, workflow_id: fields.action!.workflow_id, owner, revision: 1, agent_id: null, last_poll_at: null, last_error: null,
      created_at: now, updated_at: now,
    };
    await beforeWrite(String(doc._id), auditDetails(doc));
    await this.o.db.watchers.collection.insertOne(doc);
    this.o.changed();
    return presentWatcher(doc as StoredWatcher);
  }

  /**
   * Changes the fields given. A change of what is watched (connection, path, pattern, recursive,
   * stable_seconds, include_existing) is a new revision: the agent starts over, with the files
   * modified since the last poll counting as new (docs/automation.md "Watchers"). Whoever saves it
   * becomes its `owner` (the route checked it holds what the watcher needs).
   */
  async update(accountId: AccountId, owner: StoredOwner, id: string, input: UpdateWatcherRequest, beforeWrite: BeforeWrite = noAnnouncement): Promise<{ watcher: Watcher; changed: string[] }> {
    const changed = Object.keys(input).sort();
    if (changed.length === 0) {
      throw new BadRequestError('body must contain at least one of name, connectionId, path, pattern, recursive, poll_interval_seconds, stable_seconds, include_existing, active, action');
    }
    const current = await this.find(accountId, id);
    const fields = await this.checked(accountId, input, false);
    const next = {
      name: input.name?.trim() ?? current.name,
      connection_id: fields.connection_id ?? current.connection_id,
      path: input.path ?? current.path,
      pattern: input.pattern ?? current.pattern,
      recursive: input.recursive ?? current.recursive,
      poll_interval_seconds: input.poll_interval_seconds ?? current.poll_interval_seconds,
      stable_seconds: input.stable_seconds ?? current.stable_seconds,
      include_existing: input.include_existing ?? current.include_existing,
      active: input.active ?? current.active,
      transfer: fields.action ? fields.action.transfer : current.transfer,
      workflow_id: fields.action ? fields.action.workflow_id : current.workflow_id,
    };
    // The transfer's filters also decide what the watcher reports (watch-protocol.ts WatchSpec.filters).
    const rewatch = WATCHED.some((f) => input[f] !== undefined)
      || JSON.stringify(watchFiltersOf(next).filters ?? null) !== JSON.stringify(watchFiltersOf(current).filters ?? null);
    const update: Record<string, unknown> = { $set: { ...next, owner, updated_at: new Date() } };
    if (rewatch) update.$inc = { revision: 1 };
    await beforeWrite(id, { ...auditDetails(next), changed });
    const updated = await this.o.db.watchers.findOneAndUpdate({ _id: current._id, account_id: current.account_id }, update, { new: true })
      .lean<StoredWatcher>();
    if (!updated) throw watcherNotFound(id);
    this.o.changed();
    return { watcher: presentWatcher(updated), changed };
  }

  /** Deletes a watcher and its event history (the transfers its events made stay). Its agent stops polling it within moments. */
  async delete(accountId: AccountId, id: string, beforeWrite: BeforeWrite = noAnnouncement): Promise<Watcher> {
    const doc = await this.find(accountId, id);
    await beforeWrite(String(doc._id), auditDetails(doc));
    if ((await this.o.db.watchers.deleteOne({ _id: doc._id, account_id: doc.account_id })).deletedCount !== 1) throw watcherNotFound(id);
    await this.o.db.watcherEvents.deleteMany({ watcher_id: doc._id });
    this.o.changed();
    return presentWatcher(doc);
  }

  /** A page of the watcher's events, newest first, each with its transfer's status as it is now. */
  async listEvents(accountId: AccountId, id: string, query: ListWatcherEventsQuery): Promise<Page<WatcherEvent>> {
    const watcher = await this.find(accountId, id);
    const page = await paginate(this.o.db.watcherEvents, { watcher_id: watcher._id }, query, (doc) => doc as StoredWatcherEvent);
    const [transfers, workflowRuns] = await Promise.all([
      this.o.transfers.outcomes(page.data.map((e) => e.transfer_id)),
      this.o.workflowRuns.outcomes(page.data.map((e) => e.workflow_run_id)),
    ]);
    const outcomeOf = (e: StoredWatcherEvent) => (e.workflow_run_id ? workflowRuns.get(String(e.workflow_run_id)) : transfers.get(String(e.transfer_id))) ?? null;
    return { data: page.data.map((e) => presentEvent(e, outcomeOf(e))), next_cursor: page.next_cursor };
  }

  /** The checks of a create (every field) or an update (the fields given), 400 naming the field; the stored forms of the ids and the action. */
  private async checked(accountId: AccountId, input: UpdateWatcherRequest, create: boolean) {
    let connection_id: Types.ObjectId | undefined;
    if (input.connectionId !== undefined) connection_id = await ownedConnectionId(this.o.db, accountId, 'connectionId', input.connectionId);
    if (input.path !== undefined) {
      const problem = basePathProblem(input.path);
      if (problem) throw new BadRequestError(problem);
    }
    if (input.pattern !== undefined) {
      if (input.pattern.includes('/')) throw new BadRequestError('pattern matches file names and cannot contain "/" (use recursive for sub-folders)');
      try {
        compileNamePattern(input.pattern);
      } catch (err) {
        if (err instanceof NamePatternError) throw new BadRequestError(`pattern ${err.message}`);
        throw err;
      }
    }
    const interval = input.poll_interval_seconds;
    if (interval !== undefined && (interval < MIN_POLL_INTERVAL_SECONDS || interval > MAX_POLL_INTERVAL_SECONDS)) {
      throw new BadRequestError(`poll_interval_seconds must be a whole number from ${MIN_POLL_INTERVAL_SECONDS} to ${MAX_POLL_INTERVAL_SECONDS}`);
    }
    const stable = input.stable_seconds;
    if (stable !== undefined && (stable < 0 || stable > MAX_STABLE_SECONDS)) {
      throw new BadRequestError(`stable_seconds must be a whole number from 0 to ${MAX_STABLE_SECONDS}`);
    }
    if (create && input.action === undefined) throw new BadRequestError('action is required');
    const action = input.action === undefined ? undefined : await this.action(accountId, input.action);
    return { connection_id, action };
  }

  /** The action, checked: exactly one of `transfer` and `workflowId` (a workflow of the account). */
  private async action(accountId: AccountId, action: WatcherActionInput) {
    if (action.transfer !== undefined && action.workflowId !== undefined) throw new BadRequestError('action must have exactly one of transfer and workflowId, not both');
    if (action.workflowId !== undefined) return { transfer: null, workflow_id: await this.o.workflows.checkReference(accountId, 'action.workflowId', action.workflowId) };
    if (action.transfer === undefined) throw new BadRequestError('action must have exactly one of transfer and workflowId');
    const t = action.transfer;
    const destination = await ownedConnectionId(this.o.db, accountId, 'action.transfer.destinationConnectionId', t.destinationConnectionId);
    const problem = basePathProblem(t.destinationPath);
    if (problem) throw new BadRequestError(`action.transfer.destinationPath ${problem.replace(/^path /, '')}`);
    await this.o.parameters.checkTemplate(accountId, 'action.transfer.destinationPath', t.destinationPath, { run: true, file: true });
    return {
      transfer: { destination_connection_id: destination, destination_path: t.destinationPath, options: watcherOptions(t.options) },
      workflow_id: null,
    };
  }
}

import { Types } from 'mongoose';
import {
  basePathProblem, normalizeBasePath, type CreateTransferRequest, type ListTransferFilesQuery, type ListTransfersQuery, type Page,
  type TransferStatus, type VerifiedFile,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { TransferFileDoc } from '../../../models/transfer-file.model.js';
import type { StoredTransfer, TransferStatesOptions } from './transfer-states.js';
import { TransferReports } from './transfer-reports.js';
import { storedOptions } from './options.js';
import { BadRequestError, ConflictError, NotFoundError } from '../../../errors.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import type { ParametersService } from '../parameters/index.js';
import type { Literal } from '../../../lib/templates.js';

type AccountId = string | Types.ObjectId;

/** Where a transfer stands, as a schedule run or a watcher event shows the transfer it made. */
export interface TransferOutcome { status: TransferStatus; error: string | null }

/** 404 for a transfer that is not the caller's (unknown, malformed and other accounts' ids alike). */
export const transferNotFound = (id: string) => new NotFoundError(`Transfer ${id} not found`);

/** 409 for a state change the transfer's current state does not allow, saying which states do. */
export function stateConflict(job: Pick<StoredTransfer, '_id' | 'status' | 'queued_at'>, action: string, allowed: string): ConflictError {
  if (action === 'executed' && job.status === 'queued' && job.queued_at) {
    return new ConflictError(`Transfer ${String(job._id)} was executed already and waits for an agent; follow it with GET /transfers/${String(job._id)}`);
  }
  const hint = action === 'executed' && (job.status === 'failed' || job.status === 'cancelled')
    ? ` (POST /transfers/${String(job._id)}/retry queues it again)` : '';
  return new ConflictError(`Transfer ${String(job._id)} is ${job.status}; only ${allowed} transfers can be ${action}${hint}`);
}

function checkedPath(field: 'sourcePath' | 'destinationPath', path: string, prefix = 'body.'): string {
  const problem = basePathProblem(path);
  if (problem) throw new BadRequestError(`${prefix}${field} ${problem.replace(/^path /, '')}`);
  return normalizeBasePath(path);
}

/** A connection of the account by the id given in `field`, or 404 naming the field. */
async function ownedConnection(db: Models, accountId: AccountId, field: 'sourceConnectionId' | 'destinationConnectionId', id: string, prefix: string) {
  const _id = toObjectId(id);
  const doc = _id && await db.connections.findOne({ _id, account_id: accountId }, { name: 1, type: 1, agent_id: 1 }).lean();
  const which = field === 'sourceConnectionId' ? 'Source' : 'Destination';
  if (!doc) throw new NotFoundError(`${which} connection ${id} not found (${prefix}${field})`);
  return doc;
}

/** A connection as the choice of the agents that may run a transfer sees it. */
export interface RunConnection {
  id: string;
  name: string;
  type: string;
  /** The one agent that serves it, or null. */
  agent_id: string | null;
  /** The pool whose agents serve it, or null (with `agent_id` null: any agent of the account). */
  agent_pool: string | null;
}

/** The RunConnection of a stored connection. */
export function runConnection(doc: { _id: Types.ObjectId; name: string; type: string; agent_id?: Types.ObjectId | null; agent_pool?: string | null }): RunConnection {
  return { id: String(doc._id), name: doc.name, type: doc.type, agent_id: doc.agent_id ? String(doc.agent_id) : null, agent_pool: doc.agent_pool ?? null };
}

/** What TransfersService needs: the state machine's dependencies, and how often a waiter reads the database. */
export interface TransfersServiceOptions extends TransferStatesOptions {
  /** A blocking execute reads the transfer at least this often (its end may come from another instance). */
  pollMs: number;
  /** Renders the path templates of a new transfer (`{{params.NAME}}`, `{{date:…}}`, `{{run.id}}`). */
  parameters: Pick<ParametersService, 'renderNow'>;
}

/**
 * The run a new transfer's path templates are rendered for (docs/automation.md "Global parameters
 * and templates"). POST /transfers: now, UTC, the transfer's own id; a schedule's run: its due
 * time, its time zone, the run's id, and the prefix of its fields (`transfer.`).
 */
export interface TransferRun {
  now?: Date;
  timezone?: string;
  /** `{{run.id}}`; default the new transfer's id. */
  runId?: string;
  /** What the 400s name the paths after (`body.` by default: `body.sourcePath …`). */
  fieldPrefix?: string;
  /** The file a watcher saw (`{{file.name}}`, `{{file.path}}`); without it those are a 400. */
  file?: { name: string; path: string };
  /**
   * The new transfer's id (default: a new one). A caller that must create a transfer once even
   * when it repeats the call (a watcher event's action after a crash) passes a fixed one: the
   * second insert meets the unique `_id` (`isDuplicateKey`) and the caller reads the first.
   */
  id?: Types.ObjectId;
  /** A workflow run's own parameters (`POST /workflows/:id/run {params}`), over the account's of those names. */
  params?: ReadonlyMap<string, string>;
}

/**
 * What a new transfer is made of: a create request, whose paths are templates the account's user
 * wrote, or a Literal where the path is a value (a watcher's found file: docs/security.md
 * "Templates: data is never code"), checked as a path and stored as it is.
 */
export type NewTransfer = Omit<CreateTransferRequest, 'sourcePath' | 'destinationPath'> & {
  sourcePath: string | Literal;
  destinationPath: string | Literal;
};

/**
 * The transfers of an account (api.md "Transfers"): created by the API, moved through their
 * states by the API and by the agent gateway (transfer-states.ts), read and waited for here.
 * The agent protocol calls one run of a transfer a job (plugins/app/agents/index.ts).
 */
export class TransfersService extends TransferReports {
  constructor(private readonly options: TransfersServiceOptions) {
    super(options);
  }

  /** The caller's transfer, or 404 for unknown, malformed and other accounts' ids alike. */
  async find(accountId: AccountId, id: string): Promise<StoredTransfer> {
    const _id = toObjectId(id);
    // By _id alone, the account checked here: FerretDB (SQLite) pushes only a bare `{_id}` filter
    // down to its primary key; with a second field it is several times slower (docs/architecture.md
    // "FerretDB and query pushdown"). The driver's collection, as for the key in auth.ts: a mongoose
    // query costs more CPU than the read.
    const doc = _id && await this.o.db.transfers.collection.findOne<StoredTransfer>({ _id });
    if (!doc || String(doc.account_id) !== String(accountId)) throw transferNotFound(id);
    return doc;
  }

  /** The account's transfers, newest first, one page; `status` narrows them. */
  list(accountId: AccountId, query: ListTransfersQuery): Promise<Page<StoredTransfer>> {
    const { status, ...page } = query;
    return paginate(this.o.db.transfers, { account_id: accountId, ...(status ? { status } : {}) }, page, (doc) => doc as StoredTransfer);
  }

  /** Per-file results of every run of `transfer`, newest first; `status` and `attempt` narrow them. */
  listFiles(transfer: StoredTransfer, query: ListTransferFilesQuery): Promise<Page<TransferFileDoc>> {
    const { status, attempt, ...page } = query;
    const filter = { job_id: transfer._id, ...(status ? { status } : {}), ...(attempt ? { attempt } : {}) };
    return paginate(this.o.db.transferFiles, filter, page, (doc) => doc);
  }

  /**
   * Of `paths`, the files an attempt before `beforeAttempt` of the transfer recorded `copied` (the
   * latest such record per path), within `accountId` (the resume lookup, agents/verified-lookup.ts).
   * One query per batch with `$in`, served by the unique `{job_id, attempt, path}` index on MongoDB (FerretDB scans
   * the collection: docs/architecture.md "FerretDB and query pushdown").
   */
  async verifiedFiles(id: string, accountId: AccountId, beforeAttempt: number, paths: string[]): Promise<VerifiedFile[]> {
    const jobId = toObjectId(id);
    if (!jobId || beforeAttempt <= 1 || paths.length === 0) return [];
    const docs = await this.o.db.transferFiles.find(
      { job_id: jobId, path: { $in: [...new Set(paths)] }, account_id: new Types.ObjectId(String(accountId)), status: 'copied', attempt: { $lt: beforeAttempt } },
      { _id: 0, path: 1, size: 1, sha256: 1, attempt: 1 },
    ).lean();
    const latest = new Map<string, VerifiedFile>();
    for (const d of docs) {
      if ((latest.get(d.path)?.attempt ?? 0) >= d.attempt) continue;
      latest.set(d.path, { path: d.path, size: d.size, attempt: d.attempt, ...(d.sha256 ? { sha256: d.sha256 } : {}) });
    }
    return [...latest.values()];
  }

  /**
   * A new queued transfer between two connections of the account (404 naming the field of one
   * that is not). Its paths are templates rendered here, once, for `run` and stored rendered: a
   * bad template, an unknown or secret parameter or `{{file.*}}` is a 400 naming the path's field.
   * A Literal path is not a template: nothing in it is rendered.
   */
  async create(accountId: AccountId, input: NewTransfer, run: TransferRun = {}): Promise<StoredTransfer> {
    const { db } = this.o;
    const _id = run.id ?? new Types.ObjectId();
    const prefix = run.fieldPrefix ?? 'body.';
    const context = { now: run.now ?? new Date(), timezone: run.timezone ?? 'UTC', runId: run.runId ?? String(_id), ...(run.file ? { file: run.file } : {}) };
    const allowed = { run: true, file: run.file !== undefined };
    const rendered = async (field: 'sourcePath' | 'destinationPath') =>
      checkedPath(field, await this.options.parameters.renderNow(accountId, `${prefix}${field}`, input[field], allowed, context, run.params), prefix);
    const sourcePath = await rendered('sourcePath');
    const destinationPath = await rendered('destinationPath');
    const source = await ownedConnection(db, accountId, 'sourceConnectionId', input.sourceConnectionId, prefix);
    const destination = await ownedConnection(db, accountId, 'destinationConnectionId', input.destinationConnectionId, prefix);
    const doc = await db.transfers.create({
      _id,
      account_id: accountId,
      name: input.name.trim(),
      source_connection_id: source._id,
      source_path: sourcePath,
      destination_connection_id: destination._id,
      destination_path: destinationPath,
      options: storedOptions(input.options, `${prefix}options`),
    });
    return doc.toObject() as StoredTransfer;
  }

  /**
   * The source and destination connections of a transfer as the choice of agents needs them
   * (plugins/app/agents/eligibility.ts); 409 when one was deleted since the transfer was created.
   */
  async connectionsOf(job: Pick<StoredTransfer, 'account_id' | 'source_connection_id' | 'destination_connection_id'>): Promise<[RunConnection, RunConnection]> {
    const ids = [job.source_connection_id, job.destination_connection_id];
    const docs = await this.o.db.connections.find({ _id: { $in: ids }, account_id: job.account_id }, { name: 1, type: 1, agent_id: 1, agent_pool: 1 }).lean();
    const [source, destination] = ids.map((id, i) => {
      const doc = docs.find((d) => d._id.equals(id));
      if (!doc) throw new ConflictError(`The ${i === 0 ? 'source' : 'destination'} connection ${String(id)} of this transfer was deleted; it cannot run`);
      return runConnection(doc);
    });
    return [source!, destination!];
  }

  /**
   * The 1-based queue position of each of these transfers that waits (none for the others): one
   * read of the account's queue per account. A read; nothing is written.
   */
  async queuePositions(jobs: StoredTransfer[]): Promise<Map<string, number>> {
    const waiting = jobs.filter((j) => j.status === 'queued' && j.queued_at);
    const positions = new Map<string, number>();
    const byAccount = new Map<string, StoredTransfer[]>();
    for (const j of waiting) byAccount.set(String(j.account_id), [...(byAccount.get(String(j.account_id)) ?? []), j]);
    for (const [accountId, list] of byAccount) {
      for (const [id, n] of await this.queue.positions(accountId, list.map((j) => ({ _id: j._id, queued_at: j.queued_at! })))) positions.set(id, n);
    }
    return positions;
  }

  /**
   * The status and error of these transfers, by id (absent: deleted). One `_id` read each, the
   * lookup FerretDB pushes down; a read writes nothing, so what runs and events show never goes stale.
   */
  async outcomes(ids: Array<Types.ObjectId | null | undefined>): Promise<Map<string, TransferOutcome>> {
    const unique = [...new Set(ids.filter((id): id is Types.ObjectId => !!id).map(String))];
    const docs = await Promise.all(unique.map((id) => this.o.db.transfers.findById(id, { status: 1, error: 1 }).lean()));
    return new Map(docs.flatMap((d) => (d ? [[String(d._id), { status: d.status as TransferStatus, error: d.error ?? null }]] : [])));
  }

  /**
   * Waits until the transfer ends (or `signal` aborts: the client went away, or the server is
   * shutting down) and returns it. Reads the database after every wake-up: it may end on any
   * instance; the in-process notification only makes a local end visible at once.
   */
  async waitForEnd(id: Types.ObjectId, signal: AbortSignal): Promise<StoredTransfer | null> {
    for (;;) {
      const job = await this.o.db.transfers.findById(id).lean<StoredTransfer>();
      if (!job || (job.status !== 'queued' && job.status !== 'in-progress')) return job;
      if (signal.aborted) return null;
      await this.changes.wait(String(id), this.options.pollMs, signal);
    }
  }
}

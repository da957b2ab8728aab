import { Types } from 'mongoose';
import {
  basePathProblem, DEFAULT_TRANSFER_OPTIONS, normalizeBasePath,
  type CreateTransferRequest, type ExecuteTransferResult, type JobOptions, type Transfer, type TransferFile, type TransferStatus,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { TransferFileDoc } from '../../../models/transfer-file.model.js';
import type { Job, JobService } from './transfer-states.js';
import { BadRequestError, ConflictError, NotFoundError } from '../../../errors.js';
import { toObjectId } from '../../../lib/pagination.js';

type AccountId = string | Types.ObjectId;

export const transferNotFound = (id: string) => new NotFoundError(`Transfer ${id} not found`);

export function presentTransfer(doc: Job): Transfer {
  return {
    id: String(doc._id),
    name: doc.name,
    sourceConnectionId: String(doc.source_connection_id),
    sourcePath: doc.source_path,
    destinationConnectionId: String(doc.destination_connection_id),
    destinationPath: doc.destination_path,
    options: { ...(doc.options as JobOptions) },
    status: doc.status as TransferStatus,
    files_total: doc.files_total,
    files_transferred: doc.files_transferred,
    files_skipped: doc.files_skipped,
    files_failed: doc.files_failed,
    bytes_transferred: doc.bytes_transferred,
    started_at: doc.started_at ? doc.started_at.toISOString() : null,
    completed_at: doc.completed_at ? doc.completed_at.toISOString() : null,
    error: doc.error ?? null,
    agent_id: doc.agent_id ? String(doc.agent_id) : null,
    attempt: doc.attempt,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
  };
}

export function presentTransferFile(doc: TransferFileDoc): TransferFile {
  return {
    path: doc.path,
    attempt: doc.attempt,
    status: doc.status as TransferFile['status'],
    size: doc.size,
    sha256: doc.sha256 ?? null,
    verified_by: doc.verified_by ?? null,
    error: doc.error ?? null,
    created_at: doc.created_at.toISOString(),
  };
}

/** The execute answer (api.md: bare, not in `data`); the details only when it did not succeed. */
export function executeResult(job: Job): ExecuteTransferResult {
  const base = { success: job.status === 'completed', files_transferred: job.files_transferred, bytes_transferred: job.bytes_transferred };
  if (base.success) return base;
  return { ...base, status: job.status as TransferStatus, files_total: job.files_total, error: job.error ?? (job.status === 'cancelled' ? 'Transfer cancelled' : null) };
}

/** The caller's job, or 404 for unknown, malformed and other accounts' ids alike. */
export async function findTransfer(db: Models, accountId: AccountId, id: string): Promise<Job> {
  const _id = toObjectId(id);
  // By _id alone, the account checked here: FerretDB (SQLite) pushes only a bare `{_id}` filter
  // down to its primary key; with a second field it is several times slower (docs/architecture.md
  // "FerretDB and query pushdown"). The driver's collection, as for the key in auth.ts: a mongoose
  // query costs more CPU than the read.
  const doc = _id && await db.transfers.collection.findOne<Job>({ _id });
  if (!doc || String(doc.account_id) !== String(accountId)) throw transferNotFound(id);
  return doc;
}

function checkedPath(field: 'sourcePath' | 'destinationPath', path: string): string {
  const problem = basePathProblem(path);
  if (problem) throw new BadRequestError(`body.${field} ${problem.replace(/^path /, '')}`);
  return normalizeBasePath(path);
}

/** A connection of the account by the id given in `field`, or 404 naming the field. */
async function ownedConnection(db: Models, accountId: AccountId, field: 'sourceConnectionId' | 'destinationConnectionId', id: string) {
  const _id = toObjectId(id);
  const doc = _id && await db.connections.findOne({ _id, account_id: accountId }, { name: 1, type: 1, agent_id: 1 }).lean();
  const which = field === 'sourceConnectionId' ? 'Source' : 'Destination';
  if (!doc) throw new NotFoundError(`${which} connection ${id} not found (body.${field})`);
  return doc;
}

export async function createTransfer(db: Models, accountId: AccountId, input: CreateTransferRequest): Promise<Job> {
  const sourcePath = checkedPath('sourcePath', input.sourcePath);
  const destinationPath = checkedPath('destinationPath', input.destinationPath);
  const source = await ownedConnection(db, accountId, 'sourceConnectionId', input.sourceConnectionId);
  const destination = await ownedConnection(db, accountId, 'destinationConnectionId', input.destinationConnectionId);
  const doc = await db.transfers.create({
    account_id: accountId,
    name: input.name.trim(),
    source_connection_id: source._id,
    source_path: sourcePath,
    destination_connection_id: destination._id,
    destination_path: destinationPath,
    options: { ...DEFAULT_TRANSFER_OPTIONS, ...input.options },
  });
  return doc.toObject() as Job;
}

/**
 * The connections of a job as the choice of an agent needs them; 409 when one was deleted
 * since the job was created.
 */
export async function jobConnections(db: Models, job: Job) {
  const ids = [job.source_connection_id, job.destination_connection_id];
  const docs = await db.connections.find({ _id: { $in: ids }, account_id: job.account_id }, { name: 1, type: 1, agent_id: 1 }).lean();
  return ids.map((id, i) => {
    const doc = docs.find((d) => d._id.equals(id));
    if (!doc) throw new ConflictError(`The ${i === 0 ? 'source' : 'destination'} connection ${String(id)} of this transfer was deleted; it cannot run`);
    return { id: String(doc._id), name: doc.name, type: doc.type, agent_id: doc.agent_id };
  });
}

/** 409 for a state change the job's current state does not allow, saying which states do. */
export function stateConflict(job: Pick<Job, '_id' | 'status'>, action: string, allowed: string): ConflictError {
  const hint = action === 'executed' && (job.status === 'failed' || job.status === 'cancelled')
    ? ` (POST /transfers/${String(job._id)}/retry queues it again)` : '';
  return new ConflictError(`Transfer ${String(job._id)} is ${job.status}; only ${allowed} transfers can be ${action}${hint}`);
}

/**
 * Waits until the job ends (or `signal` aborts: the client went away, or the server is shutting
 * down) and returns it. Reads the database after every wake-up: the job may end on any instance;
 * the in-process notification only makes a local end visible at once.
 */
export async function waitForEnd(db: Models, jobs: JobService, id: Types.ObjectId, pollMs: number, signal: AbortSignal): Promise<Job | null> {
  for (;;) {
    const job = await db.transfers.findById(id).lean<Job>();
    if (!job || (job.status !== 'queued' && job.status !== 'in-progress')) return job;
    if (signal.aborted) return null;
    await jobs.changes.wait(String(id), pollMs, signal);
  }
}

import { randomUUID } from 'node:crypto';
import { Types } from 'mongoose';
import type { FastifyBaseLogger } from 'fastify';
import {
  basePathProblem, type SettleCounts, type TransferOptionsInput, type TransferStatus, type WorkflowRun, type WorkflowRunStatus,
  type WorkflowRunStep, type WorkflowStepStatus, type WorkflowTrigger,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { WorkflowRunDoc } from '../../../models/workflow-run.model.js';
import type { WorkflowDoc } from '../../../models/workflow.model.js';
import type { ParametersService } from '../parameters/index.js';
import type { StoredTransfer, TransferOutcome, TransfersService } from '../transfers/index.js';
import type { Outbox } from '../webhooks/outbox.js';
import type { NotificationDeliverer } from '../notifications/index.js';
import { AppError, BadRequestError } from '../../../errors.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';
import { parseTemplate, templateUses } from '../../../lib/templates.js';
import type { SourceSettler } from './settle-step.js';
import { renderEmail } from '../notifications/index.js';

export type StoredWorkflowRun = WorkflowRunDoc & { _id: Types.ObjectId };
type RunStep = StoredWorkflowRun['steps'][number];
type Workflow = WorkflowDoc & { _id: Types.ObjectId };

/** How long a run's lock lasts without renewal: an instance that stopped mid-step is taken over after it. */
export const RUN_LOCK_MS = 2 * 60_000;

/** How a run starts: what triggered it, and what its templates render with. */
export interface RunStart {
  trigger: { type: WorkflowTrigger; id: Types.ObjectId | null };
  /** The run's own parameters, over the account's of those names. */
  params?: Record<string, string>;
  /** The watcher's file (`{{file.name}}`, `{{file.path}}`). */
  file?: { name: string; path: string };
  /** The instant `{{date:…}}` shows (a schedule's due time; default now) and its zone. */
  now?: Date;
  timezone?: string;
  /**
   * The run's id (default a new one). A trigger that must start a run once even when it repeats
   * (a watcher event, a schedule run, after a crash) passes its own id: the second insert meets the unique `_id`.
   */
  id?: Types.ObjectId;
}

export interface WorkflowRunsOptions {
  db: Models;
  transfers: Pick<TransfersService, 'create' | 'enqueue' | 'cancel' | 'outcomes'>;
  parameters: Pick<ParametersService, 'renderNow'>;
  settler: Pick<SourceSettler, 'settle'>;
  outbox: Outbox;
  /** Queues a notify step's email for the account's notification recipients (plugins/app/notifications/). */
  email: Pick<NotificationDeliverer, 'queueEmail'>;
  /** Tells this instance's dispatcher that a transfer waits (the others find it on their own). */
  wakeDispatcher: () => void;
  log: FastifyBaseLogger;
  lockMs?: number;
}

const ENDED_RUN: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);
const ENDED_TRANSFER: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);

/** What a step came to: done one way or another, or waiting for its transfer. */
type StepOutcome = 'wait' | { status: 'completed' | 'failed'; error?: string | null; files?: SettleCounts | null };

const TRIGGERED_BY: Record<WorkflowTrigger, string> = { manual: 'by hand', schedule: 'by a schedule', watcher: 'by a watcher' };

/** A 400 for a template using `{{file.*}}` in a run that has no file (one not started by a watcher). */
function needsNoFile(run: Pick<StoredWorkflowRun, 'file' | 'trigger'>, field: string, text: string | null | undefined): void {
  if (run.file?.path || !text) return;
  let uses;
  try {
    uses = templateUses(parseTemplate(text));
  } catch {
    return; // checked when stored; a render names the problem
  }
  if (uses.file) {
    throw new BadRequestError(`${field} uses {{file.name}} or {{file.path}}, which only a run started by a watcher has (this run was started ${TRIGGERED_BY[run.trigger.type as WorkflowTrigger]})`);
  }
}

/** The read shape of a run. */
export function presentRun(run: StoredWorkflowRun): WorkflowRun {
  const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);
  return {
    id: String(run._id),
    workflow_id: String(run.workflow_id),
    workflow_name: run.workflow_name,
    status: run.status as WorkflowRunStatus,
    steps: run.steps.map((s): WorkflowRunStep => ({
      type: s.step.type as WorkflowRunStep['type'],
      status: s.status as WorkflowStepStatus,
      transfer_id: s.step.type === 'transfer' && s.transfer_id ? String(s.transfer_id) : null,
      files: (s.files as SettleCounts | null) ?? null,
      error: s.error ?? null,
      started_at: iso(s.started_at),
      completed_at: iso(s.completed_at),
    })),
    trigger: { type: run.trigger.type as WorkflowTrigger, id: run.trigger.id ? String(run.trigger.id) : null },
    file: run.file?.path ? { name: run.file.name ?? '', path: run.file.path } : null,
    params: Object.keys((run.params as Record<string, string> | null) ?? {}).sort(),
    error: run.error ?? null,
    created_at: run.created_at.toISOString(),
    completed_at: iso(run.completed_at),
  };
}

/**
 * The run engine (docs/architecture.md "Workflows"). A run is advanced step by step by whichever
 * instance holds its lock (an insert into `workflow_run_locks`, exact on FerretDB): right after it
 * is created, when the transfer it waits for ends (TransfersService `onEnded`, on the instance that
 * ended it), and by every instance's sweep (a run whose transfer ended elsewhere, or whose
 * instance stopped mid-step). Each step's side effect happens once however often it is retried:
 * a transfer step's transfer and a notify step's event get ids chosen and stored before they are
 * created; move_source and delete_source are safe to repeat (settle-protocol.ts).
 */
export class WorkflowRuns {
  /** Runs being advanced by this process, and those asked for again meanwhile. */
  private readonly advancing = new Set<string>();
  private readonly again = new Set<string>();
  private readonly background = new Set<Promise<void>>();
  private readonly stopping = new AbortController();

  constructor(private readonly o: WorkflowRunsOptions) {}

  /** Creates a run of `workflow` (once per `start.id`) and advances it as far as it goes now; the run as it stands after. */
  async start(workflow: Workflow, start: RunStart): Promise<StoredWorkflowRun> {
    const now = new Date();
    const run = {
      _id: start.id ?? new Types.ObjectId(), account_id: workflow.account_id, workflow_id: workflow._id, workflow_name: workflow.name,
      on_failure: workflow.on_failure, status: 'queued',
      steps: workflow.steps.map((step) => ({ step, status: 'pending', transfer_id: null, event_id: null, files: null, error: null, started_at: null, completed_at: null })),
      trigger: start.trigger, file: start.file ?? null, params: start.params && Object.keys(start.params).length > 0 ? start.params : null,
      render_at: start.now ?? now, timezone: start.timezone ?? 'UTC', waiting_for: null, cancel_requested: false, error: null,
      created_at: now, updated_at: now, completed_at: null,
    };
    try {
      await this.o.db.workflowRuns.collection.insertOne(run);
    } catch (err) {
      if (!isDuplicateKey(err)) throw err; // started before (a repeated trigger): advanced as it stands
    }
    await this.advance(run._id);
    return (await this.read(run._id))!;
  }

  /**
   * Starts a run of the account's workflow `workflowId` for a schedule or watcher: a 400 (which
   * fails their run or event, saying so) when the workflow was deleted meanwhile.
   */
  async startOf(accountId: Types.ObjectId, workflowId: Types.ObjectId, start: RunStart): Promise<StoredWorkflowRun> {
    const workflow = await this.o.db.workflows.findById(workflowId).lean<Workflow>();
    if (!workflow || !workflow.account_id.equals(accountId)) throw new BadRequestError(`workflowId: workflow ${String(workflowId)} no longer exists`);
    return this.start(workflow, start);
  }

  /**
   * Cancels a run: flagged first (an instance advancing it stops at its next step or batch), its
   * running transfer cancelled, then advanced here to record it. The run as it stands after.
   */
  async cancel(run: StoredWorkflowRun): Promise<StoredWorkflowRun> {
    await this.o.db.workflowRuns.updateOne({ _id: run._id, status: { $in: ['queued', 'running'] } }, { $set: { cancel_requested: true } });
    const running = run.steps.find((s) => s.status === 'running' && s.step.type === 'transfer' && s.transfer_id);
    if (running) await this.o.transfers.cancel(run.account_id, running.transfer_id!);
    await this.advance(run._id);
    return (await this.read(run._id)) ?? run;
  }

  /** What became of these runs, by id, as the status of a transfer would say it (schedule runs and watcher events show it). */
  async outcomes(ids: Array<Types.ObjectId | null | undefined>): Promise<Map<string, TransferOutcome>> {
    const unique = [...new Set(ids.filter((id): id is Types.ObjectId => !!id).map(String))];
    const docs = await Promise.all(unique.map((id) => this.o.db.workflowRuns.findById(id, { status: 1, error: 1 }).lean()));
    const asTransfer = (status: string): TransferStatus => (status === 'running' ? 'in-progress' : status as TransferStatus);
    return new Map(docs.flatMap((d) => (d ? [[String(d._id), { status: asTransfer(d.status), error: d.error ?? null }]] : [])));
  }

  /** A transfer ended on this instance: the run waiting for it goes on (in the background: the report that ended it is not held up). */
  transferEnded(job: Pick<StoredTransfer, '_id'>): void {
    this.inBackground(async () => {
      const runs = await this.o.db.workflowRuns.find({ waiting_for: job._id }, { _id: 1 }).lean();
      for (const run of runs) await this.advance(run._id);
    });
  }

  /**
   * Advances the runs under way that need it: those waiting for a transfer that has ended, and
   * those waiting for nothing (an instance stopped mid-step; the lock says whether it is taken).
   * Reads the runs under way only, never the history. Returns how many it advanced.
   */
  async sweep(): Promise<number> {
    const active = await this.o.db.workflowRuns.find({ status: { $in: ['queued', 'running'] } }, { _id: 1, waiting_for: 1 }).limit(1000).lean();
    const outcomes = await this.o.transfers.outcomes(active.map((r) => r.waiting_for));
    let advanced = 0;
    for (const run of active) {
      const waited = run.waiting_for ? outcomes.get(String(run.waiting_for)) : undefined;
      if (waited && !ENDED_TRANSFER.has(waited.status)) continue;
      await this.advance(run._id);
      advanced++;
    }
    return advanced;
  }

  /** Stops the background work and waits for it (the app is closing). */
  async close(): Promise<void> {
    this.stopping.abort();
    await Promise.allSettled([...this.background]);
  }

  /** Advances a run as far as it goes now, if no one else (here or on another instance) is. */
  async advance(id: Types.ObjectId): Promise<void> {
    const key = String(id);
    if (this.advancing.has(key)) {
      this.again.add(key);
      return;
    }
    this.advancing.add(key);
    try {
      do {
        this.again.delete(key);
        const token = await this.lock(id);
        if (!token) return;
        try {
          await this.steps(id, token);
        } finally {
          await this.o.db.workflowRunLocks.deleteOne({ _id: id, token }).catch(() => {});
        }
      } while (this.again.has(key));
    } finally {
      this.advancing.delete(key);
      this.again.delete(key);
    }
  }

  private inBackground(work: () => Promise<void>): void {
    const p = work().catch((err) => this.o.log.error({ err }, 'workflows: advancing a run failed; the sweep retries it'));
    this.background.add(p);
    void p.finally(() => this.background.delete(p));
  }

  /** Takes the run's lock: its token, or null while another holder's lock has not expired. */
  private async lock(id: Types.ObjectId): Promise<string | null> {
    const token = randomUUID();
    const { workflowRunLocks } = this.o.db;
    for (let tries = 0; tries < 2; tries++) {
      try {
        await workflowRunLocks.collection.insertOne({ _id: id, token, expires_at: new Date(Date.now() + (this.o.lockMs ?? RUN_LOCK_MS)) });
        return token;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      const held = await workflowRunLocks.findById(id).lean();
      if (held && held.expires_at.getTime() > Date.now()) return null;
      // Expired (its instance stopped): deleted naming its token, so of several finders one takes it over.
      if (held) await workflowRunLocks.deleteOne({ _id: id, token: held.token });
    }
    return null;
  }

  private renew(id: Types.ObjectId, token: string): Promise<unknown> {
    return this.o.db.workflowRunLocks.updateOne({ _id: id, token }, { $set: { expires_at: new Date(Date.now() + (this.o.lockMs ?? RUN_LOCK_MS)) } });
  }

  private read(id: Types.ObjectId): Promise<StoredWorkflowRun | null> {
    return this.o.db.workflowRuns.findById(id).lean<StoredWorkflowRun>();
  }

  /** Writes the run's steps (only the lock's holder writes them) and any other fields. */
  private async save(run: StoredWorkflowRun, set: Record<string, unknown> = {}): Promise<void> {
    await this.o.db.workflowRuns.updateOne({ _id: run._id }, { $set: { steps: run.steps, updated_at: new Date(), ...set } });
  }

  /** The step loop, under the lock: each step in order until one waits for its transfer, or the run ends. */
  private async steps(id: Types.ObjectId, token: string): Promise<void> {
    for (;;) {
      const run = await this.read(id);
      if (!run || ENDED_RUN.has(run.status)) return;
      if (run.cancel_requested) return this.endCancelled(run);
      const i = run.steps.findIndex((s) => s.status === 'pending' || s.status === 'running');
      if (i < 0) return this.end(run);
      const outcome = await this.step(run, i, token);
      if (outcome === 'wait') return;
      const current = await this.read(id);
      if (!current || ENDED_RUN.has(current.status)) return;
      const step = current.steps[i]!;
      Object.assign(step, { status: outcome.status, error: outcome.error ?? null, completed_at: new Date(), ...(outcome.files !== undefined ? { files: outcome.files } : {}) });
      if (outcome.status === 'failed' && current.on_failure === 'stop') {
        for (const later of current.steps.slice(i + 1)) if (later.status === 'pending') later.status = 'skipped';
      }
      await this.save(current, { status: 'running', waiting_for: null });
      await this.renew(id, token);
    }
  }

  /** Runs step `i` (pending, or running when taken over or when its transfer ended). */
  private async step(run: StoredWorkflowRun, i: number, token: string): Promise<StepOutcome> {
    const s = run.steps[i]!;
    const field = `steps[${i}]`;
    try {
      switch (s.step.type) {
        case 'transfer':
          return await this.transferStep(run, i);
        case 'move_source':
        case 'delete_source':
          return await this.settleStep(run, i, token);
        case 'notify':
          return await this.notifyStep(run, i);
        default:
          return { status: 'failed', error: `${field}: unknown step type ${s.step.type}` };
      }
    } catch (err) {
      // A 4xx is the run's own problem (a connection deleted, a parameter gone or made secret, no
      // agent online): the step fails saying so. Anything else is the server's: logged, not shown.
      if (err instanceof AppError && err.statusCode < 500) return { status: 'failed', error: err.message };
      this.o.log.error({ err, runId: String(run._id), step: i }, 'workflow step failed with an internal error');
      return { status: 'failed', error: 'the step failed with an internal error (logged by the server)' };
    }
  }

  /** Marks step `i` running (first time) and saves whatever `extra` the step needs stored first. */
  private async begin(run: StoredWorkflowRun, i: number, extra: Partial<RunStep> = {}, set: Record<string, unknown> = {}): Promise<void> {
    const s = run.steps[i]!;
    if (s.status === 'pending') Object.assign(s, { status: 'running', started_at: new Date() });
    Object.assign(s, extra);
    await this.save(run, { status: 'running', ...set });
  }

  private context(run: StoredWorkflowRun) {
    const params = new Map(Object.entries((run.params as Record<string, string> | null) ?? {}));
    const file = run.file?.path ? { name: run.file.name ?? '', path: run.file.path } : undefined;
    return { now: run.render_at, timezone: run.timezone, runId: String(run._id), params, file };
  }

  /**
   * A transfer step: its transfer created once (the id stored first), queued, and waited for: the
   * step ends when the transfer does (completed, else failed with the transfer's error).
   */
  private async transferStep(run: StoredWorkflowRun, i: number): Promise<StepOutcome> {
    const s = run.steps[i]!;
    const t = s.step;
    const id = s.transfer_id ?? new Types.ObjectId();
    await this.begin(run, i, { transfer_id: id }, { waiting_for: id });
    let job = await this.o.db.transfers.findById(id).lean<StoredTransfer>();
    if (!job) {
      const ctx = this.context(run);
      for (const [field, text] of [['sourcePath', t.source_path], ['destinationPath', t.destination_path]] as const) needsNoFile(run, `steps[${i}].${field}`, text);
      try {
        job = await this.o.transfers.create(run.account_id, {
          name: `${run.workflow_name}: step ${i + 1}`.slice(0, 200),
          sourceConnectionId: String(t.source_connection_id), sourcePath: t.source_path!,
          destinationConnectionId: String(t.destination_connection_id), destinationPath: t.destination_path!,
          options: t.options as TransferOptionsInput,
        }, { id, now: ctx.now, timezone: ctx.timezone, runId: ctx.runId, params: ctx.params, fieldPrefix: `steps[${i}].`, ...(ctx.file ? { file: ctx.file } : {}) });
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        job = await this.o.db.transfers.findById(id).lean<StoredTransfer>();
        if (!job) throw err;
      }
    }
    if (await this.o.transfers.enqueue(job)) this.o.wakeDispatcher();
    const now = (await this.o.transfers.outcomes([id])).get(String(id));
    if (!now) return { status: 'failed', error: `its transfer ${String(id)} was deleted` };
    if (!ENDED_TRANSFER.has(now.status)) return 'wait';
    if (now.status === 'completed') return { status: 'completed' };
    return { status: 'failed', error: now.status === 'cancelled' ? `its transfer ${String(id)} was cancelled` : `its transfer ${String(id)} failed: ${now.error ?? 'no reason given'}` };
  }

  /** The transfer step a move_source or delete_source acts on: the nearest before it. */
  private transferOf(run: StoredWorkflowRun, i: number): RunStep | undefined {
    return run.steps.slice(0, i).reverse().find((s) => s.step.type === 'transfer');
  }

  /** move_source / delete_source: the transfer's verified source files, through an agent serving the source connection. */
  private async settleStep(run: StoredWorkflowRun, i: number, token: string): Promise<StepOutcome> {
    const s = run.steps[i]!;
    await this.begin(run, i, {}, { waiting_for: null });
    const before = this.transferOf(run, i);
    const job = before?.transfer_id && await this.o.db.transfers.findById(before.transfer_id).lean<StoredTransfer>();
    if (!job) return { status: 'failed', error: 'the transfer step before it made no transfer (or its transfer was deleted): nothing to act on' };
    if (!ENDED_TRANSFER.has(job.status)) return { status: 'failed', error: `its transfer ${String(job._id)} has not ended` };
    let to: string | undefined;
    if (s.step.type === 'move_source') {
      const ctx = this.context(run);
      needsNoFile(run, `steps[${i}].to`, s.step.to);
      to = await this.o.parameters.renderNow(
        run.account_id, `steps[${i}].to`, s.step.to!, { run: true, file: true },
        { now: ctx.now, timezone: ctx.timezone, runId: ctx.runId, ...(ctx.file ? { file: ctx.file } : {}) }, ctx.params,
      );
      const problem = basePathProblem(to);
      if (problem) throw new BadRequestError(`steps[${i}].to ${problem.replace(/^path /, '')}`);
    }
    const settled = await this.o.settler.settle(job, s.step.type === 'move_source' ? 'move' : 'delete', to, {
      signal: this.stopping.signal,
      between: async () => {
        await this.renew(run._id, token);
        const now = await this.o.db.workflowRuns.findById(run._id, { cancel_requested: 1 }).lean();
        return !now?.cancel_requested && !this.stopping.signal.aborted;
      },
    });
    return { status: settled.error ? 'failed' : 'completed', error: settled.error, files: settled.files };
  }

  /**
   * notify: a `workflow.notify` event for the account's webhooks, or an email to the account's
   * notification recipients; either recorded once (its id stored first, a repeat queues nothing).
   */
  private async notifyStep(run: StoredWorkflowRun, i: number): Promise<StepOutcome> {
    const s = run.steps[i]!;
    const eventId = s.event_id ?? new Types.ObjectId();
    await this.begin(run, i, { event_id: eventId }, { waiting_for: null });
    const subject = s.step.subject ?? `Workflow ${run.workflow_name}`;
    const data = { ...this.summary(run), subject };
    if (s.step.channel !== 'email') {
      await this.o.outbox.emit(run.account_id, 'workflow.notify', data, eventId);
      return { status: 'completed' };
    }
    const { text } = renderEmail('workflow.notify', new Date(), data);
    const queued = await this.o.email.queueEmail(run.account_id, { eventId, event: 'workflow.notify', subject: `[xfer] ${subject}`, text });
    if (!queued) return { status: 'failed', error: 'email notifications are off for this account (or have no sender or recipients): set them with PUT /notifications/settings' };
    return { status: 'completed' };
  }

  /** What workflow events carry: the run, its trigger and file, and each step's status so far. */
  private summary(run: StoredWorkflowRun): Record<string, unknown> {
    const shown = presentRun(run);
    return {
      run_id: shown.id, workflow_id: shown.workflow_id, workflow_name: shown.workflow_name, trigger: shown.trigger, file: shown.file,
      steps: shown.steps.map((st) => ({ type: st.type, status: st.status, transfer_id: st.transfer_id, files: st.files, error: st.error })),
    };
  }

  /** Every step has ended: the run is completed, or failed when a step failed (the first one's error). */
  private async end(run: StoredWorkflowRun): Promise<void> {
    const failedAt = run.steps.findIndex((s) => s.status === 'failed');
    const status = failedAt < 0 ? 'completed' : 'failed';
    const error = failedAt < 0 ? null : `steps[${failedAt}] (${run.steps[failedAt]!.step.type}): ${run.steps[failedAt]!.error ?? 'failed'}`;
    const ended = await this.o.db.workflowRuns.findOneAndUpdate(
      { _id: run._id, status: { $in: ['queued', 'running'] } },
      { $set: { status, error, waiting_for: null, completed_at: new Date(), updated_at: new Date() } },
      { new: true },
    ).lean<StoredWorkflowRun>();
    if (ended) await this.o.outbox.emit(run.account_id, status === 'completed' ? 'workflow.completed' : 'workflow.failed', { ...this.summary(ended), status, error });
  }

  /** The run was cancelled: its running step is marked so (its transfer was cancelled by the request), the rest skipped. */
  private async endCancelled(run: StoredWorkflowRun): Promise<void> {
    const now = new Date();
    for (const s of run.steps) {
      if (s.status === 'running') {
        if (s.step.type === 'transfer' && s.transfer_id) await this.o.transfers.cancel(run.account_id, s.transfer_id);
        Object.assign(s, { status: 'cancelled', completed_at: now });
      } else if (s.status === 'pending') {
        s.status = 'skipped';
      }
    }
    await this.o.db.workflowRuns.updateOne(
      { _id: run._id, status: { $in: ['queued', 'running'] } },
      { $set: { steps: run.steps, status: 'cancelled', error: 'the run was cancelled', waiting_for: null, completed_at: now, updated_at: now } },
    );
    await this.o.outbox.emit(run.account_id, 'workflow.failed', { ...this.summary({ ...run, status: 'cancelled' }), status: 'cancelled', error: 'the run was cancelled' });
  }
}

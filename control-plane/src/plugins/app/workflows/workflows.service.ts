import { Types } from 'mongoose';
import {
  basePathProblem,
  type CreateWorkflowRequest, type ListWorkflowRunsQuery, type ListWorkflowsQuery, type Page, type RunWorkflowRequest,
  type UpdateWorkflowRequest, type Workflow, type WorkflowRun, type WorkflowStep, type WorkflowStepInput,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { WorkflowDoc, WorkflowStepDoc } from '../../../models/workflow.model.js';
import type { ParametersService } from '../parameters/index.js';
import { BadRequestError, ConflictError, NotFoundError } from '../../../errors.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import { parseTemplate, templateUses } from '../../../lib/templates.js';
import { ownedConnectionId } from '../connections/index.js';
import { presentedOptions, storedOptions } from '../transfers/index.js';
import { presentRun, type StoredWorkflowRun, type WorkflowRuns } from './workflow-runs.js';

type AccountId = string | Types.ObjectId;
export type StoredWorkflow = WorkflowDoc & { _id: Types.ObjectId };

/** Called with what the audit record names after the checks, right before the write (audit.service.ts `change`). */
export type BeforeWrite = (id: string, details: Record<string, unknown>) => Promise<void>;
const noAnnouncement: BeforeWrite = async () => {};

export interface WorkflowsServiceOptions {
  db: Models;
  parameters: Pick<ParametersService, 'checkTemplate'>;
  runs: WorkflowRuns;
}

const workflowNotFound = (id: string) => new NotFoundError(`Workflow ${id} not found`);
const runNotFound = (id: string) => new NotFoundError(`Workflow run ${id} not found`);

/** The fields each step type takes (besides `type`). */
const FIELDS: Record<WorkflowStepInput['type'], { required: string[]; optional: string[] }> = {
  transfer: { required: ['sourceConnectionId', 'sourcePath', 'destinationConnectionId', 'destinationPath'], optional: ['options'] },
  move_source: { required: ['to'], optional: [] },
  delete_source: { required: [], optional: [] },
  notify: { required: ['channel'], optional: ['subject', 'to'] },
};

/** The read shape of a stored step: its type and the fields it has. */
export function presentStep(s: WorkflowStepDoc): WorkflowStep {
  return {
    type: s.type as WorkflowStep['type'],
    ...(s.source_connection_id ? { sourceConnectionId: String(s.source_connection_id) } : {}),
    ...(s.source_path !== undefined && s.source_path !== null ? { sourcePath: s.source_path } : {}),
    ...(s.destination_connection_id ? { destinationConnectionId: String(s.destination_connection_id) } : {}),
    ...(s.destination_path !== undefined && s.destination_path !== null ? { destinationPath: s.destination_path } : {}),
    ...(s.options ? { options: presentedOptions(s.options) } : {}),
    ...(s.to !== undefined && s.to !== null ? { to: s.to } : {}),
    ...(s.channel ? { channel: s.channel as WorkflowStep['channel'] } : {}),
    ...(s.subject ? { subject: s.subject } : {}),
  };
}

export function presentWorkflow(doc: StoredWorkflow): Workflow {
  return {
    id: String(doc._id),
    name: doc.name,
    steps: doc.steps.map(presentStep),
    on_failure: doc.on_failure as Workflow['on_failure'],
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
  };
}

/** What an audit record says about a workflow: its name, failure rule and step types (paths show in the workflow itself). */
function auditDetails(doc: Pick<StoredWorkflow, 'name' | 'on_failure' | 'steps'>): Record<string, unknown> {
  return { name: doc.name, on_failure: doc.on_failure, steps: doc.steps.map((s) => s.type) };
}

/**
 * An account's workflows and their runs (`app.workflows`; docs/automation.md "Workflows"). Every
 * query is scoped to the account: an unknown id, a malformed one and another account's are the
 * same 404. Running is workflow-runs.ts.
 */
export class WorkflowsService {
  constructor(private readonly o: WorkflowsServiceOptions) {}

  async list(accountId: AccountId, query: ListWorkflowsQuery): Promise<Page<Workflow>> {
    const page = await paginate(this.o.db.workflows, { account_id: accountId }, query, (doc) => doc as StoredWorkflow);
    return { data: page.data.map(presentWorkflow), next_cursor: page.next_cursor };
  }

  async get(accountId: AccountId, id: string): Promise<Workflow> {
    return presentWorkflow(await this.find(accountId, id));
  }

  /** The stored workflow of the caller, or 404 for unknown, malformed and other accounts' ids alike. */
  async find(accountId: AccountId, id: string): Promise<StoredWorkflow> {
    const _id = toObjectId(id);
    const doc = _id && await this.o.db.workflows.findById(_id).lean<StoredWorkflow>();
    if (!doc || String(doc.account_id) !== String(accountId)) throw workflowNotFound(id);
    return doc;
  }

  /**
   * Checks that `id` names a workflow of the account, for a schedule's or watcher's `workflowId`
   * (a 400 naming `field`: the id is part of the body, not the path).
   */
  async checkReference(accountId: AccountId, field: string, id: string): Promise<Types.ObjectId> {
    const _id = toObjectId(id);
    const found = _id && await this.o.db.workflows.exists({ _id, account_id: accountId });
    if (!found || !_id) throw new BadRequestError(`${field}: workflow ${id} not found`);
    return _id;
  }

  async create(accountId: AccountId, input: CreateWorkflowRequest, beforeWrite: BeforeWrite = noAnnouncement): Promise<Workflow> {
    const steps = await this.checkedSteps(accountId, input.steps);
    const now = new Date();
    const doc = {
      _id: new Types.ObjectId(), account_id: new Types.ObjectId(String(accountId)), name: input.name.trim(), steps,
      on_failure: input.on_failure ?? 'stop', created_at: now, updated_at: now,
    };
    await beforeWrite(String(doc._id), auditDetails(doc));
    await this.o.db.workflows.collection.insertOne(doc);
    return presentWorkflow(doc as StoredWorkflow);
  }

  /** Changes the fields given; given `steps` replace all. Runs under way keep the steps they started with. */
  async update(accountId: AccountId, id: string, input: UpdateWorkflowRequest, beforeWrite: BeforeWrite = noAnnouncement): Promise<Workflow> {
    const changed = Object.keys(input).sort();
    if (changed.length === 0) throw new BadRequestError('body must contain at least one of name, steps, on_failure');
    const current = await this.find(accountId, id);
    const set = {
      name: input.name?.trim() ?? current.name,
      steps: input.steps ? await this.checkedSteps(accountId, input.steps) : current.steps,
      on_failure: input.on_failure ?? current.on_failure,
      updated_at: new Date(),
    };
    await beforeWrite(id, { ...auditDetails(set), changed });
    const updated = await this.o.db.workflows.findOneAndUpdate({ _id: current._id, account_id: current.account_id }, { $set: set }, { new: true })
      .lean<StoredWorkflow>();
    if (!updated) throw workflowNotFound(id);
    return presentWorkflow(updated);
  }

  /**
   * Deletes a workflow and its run history; refused (409) while a run is under way or a schedule
   * or watcher names it, which would otherwise fail every later trigger.
   */
  async delete(accountId: AccountId, id: string, beforeWrite: BeforeWrite = noAnnouncement): Promise<Workflow> {
    const doc = await this.find(accountId, id);
    const { db } = this.o;
    const [schedule, watcher, active] = await Promise.all([
      db.schedules.findOne({ account_id: doc.account_id, workflow_id: doc._id }, { name: 1 }).lean(),
      db.watchers.findOne({ account_id: doc.account_id, workflow_id: doc._id }, { name: 1 }).lean(),
      db.workflowRuns.findOne({ workflow_id: doc._id, status: { $in: ['queued', 'running'] } }, { _id: 1 }).lean(),
    ]);
    if (schedule) throw new ConflictError(`Workflow ${id} is run by schedule '${schedule.name}' (${String(schedule._id)}): change or delete the schedule first`);
    if (watcher) throw new ConflictError(`Workflow ${id} is run by watcher '${watcher.name}' (${String(watcher._id)}): change or delete the watcher first`);
    if (active) throw new ConflictError(`Workflow ${id} has a run under way (${String(active._id)}): cancel it or wait for it to end`);
    await beforeWrite(String(doc._id), auditDetails(doc));
    if ((await db.workflows.deleteOne({ _id: doc._id, account_id: doc.account_id })).deletedCount !== 1) throw workflowNotFound(id);
    await db.workflowRuns.deleteMany({ workflow_id: doc._id });
    return presentWorkflow(doc);
  }

  /** Starts a run now (`POST /workflows/:id/run`); the run as it stands once its first step started. */
  async runNow(accountId: AccountId, id: string, input: RunWorkflowRequest): Promise<WorkflowRun> {
    const workflow = await this.find(accountId, id);
    const params = input.params ?? {};
    // A run's parameters stand in for the account's of those names; each must be one the steps use.
    const used = new Set(workflow.steps.flatMap((s) => [s.source_path, s.destination_path, s.to].flatMap((t) => (t ? templateUses(parseTemplate(t)).params : []))));
    const unused = Object.keys(params).find((name) => !used.has(name));
    if (unused !== undefined) throw new BadRequestError(`params.${unused}: no step of this workflow uses {{params.${unused}}}`);
    const run = await this.o.runs.start(workflow, { trigger: { type: 'manual', id: null }, params });
    return presentRun(run);
  }

  async listRuns(accountId: AccountId, id: string, query: ListWorkflowRunsQuery): Promise<Page<WorkflowRun>> {
    const workflow = await this.find(accountId, id);
    const { status, ...pageQuery } = query;
    const page = await paginate(this.o.db.workflowRuns, { workflow_id: workflow._id, ...(status ? { status } : {}) }, pageQuery, (doc) => doc as StoredWorkflowRun);
    return { data: page.data.map(presentRun), next_cursor: page.next_cursor };
  }

  async getRun(accountId: AccountId, runId: string): Promise<WorkflowRun> {
    return presentRun(await this.findRun(accountId, runId));
  }

  /** Cancels a run under way (409 once it has ended); the run as it stands after. */
  async cancelRun(accountId: AccountId, runId: string): Promise<WorkflowRun> {
    const run = await this.findRun(accountId, runId);
    if (run.status !== 'queued' && run.status !== 'running') throw new ConflictError(`Workflow run ${runId} has ended (${run.status}); only a queued or running run can be cancelled`);
    return presentRun(await this.o.runs.cancel(run));
  }

  private async findRun(accountId: AccountId, runId: string): Promise<StoredWorkflowRun> {
    const _id = toObjectId(runId);
    const doc = _id && await this.o.db.workflowRuns.findById(_id).lean<StoredWorkflowRun>();
    if (!doc || String(doc.account_id) !== String(accountId)) throw runNotFound(runId);
    return doc;
  }

  /**
   * The steps of a create or update, checked (a 400 naming `steps[i].field`): each type's fields
   * and no others, connections of the account, paths that are valid templates of existing,
   * non-secret parameters (`{{file.*}}` allowed: a watcher's run has a file; another run fails
   * the step saying so), move_source and delete_source after a transfer step whose files no
   * earlier step moved or deleted, notify by email (the account's notification recipients) or webhook event.
   */
  private async checkedSteps(accountId: AccountId, steps: WorkflowStepInput[]): Promise<WorkflowStepDoc[]> {
    const out: WorkflowStepDoc[] = [];
    let transferAt = -1;
    let settledBy = -1;
    for (const [i, step] of steps.entries()) {
      const at = `steps[${i}]`;
      const { required, optional } = FIELDS[step.type];
      for (const field of Object.keys(step)) {
        if (field !== 'type' && !required.includes(field) && !optional.includes(field)) throw new BadRequestError(`${at}.${field} is not a field of a ${step.type} step`);
      }
      const missing = required.find((field) => (step as Record<string, unknown>)[field] === undefined);
      if (missing) throw new BadRequestError(`${at}.${missing} is required for a ${step.type} step`);
      switch (step.type) {
        case 'transfer': {
          const source = await ownedConnectionId(this.o.db, accountId, `${at}.sourceConnectionId`, step.sourceConnectionId!);
          const destination = await ownedConnectionId(this.o.db, accountId, `${at}.destinationConnectionId`, step.destinationConnectionId!);
          await this.checkPath(accountId, `${at}.sourcePath`, step.sourcePath!);
          await this.checkPath(accountId, `${at}.destinationPath`, step.destinationPath!);
          out.push({
            type: 'transfer', source_connection_id: source, source_path: step.sourcePath!, destination_connection_id: destination,
            destination_path: step.destinationPath!, options: storedOptions(step.options, `${at}.options`),
          });
          transferAt = i;
          settledBy = -1;
          break;
        }
        case 'move_source':
        case 'delete_source': {
          if (transferAt < 0) throw new BadRequestError(`${at}: a ${step.type} step needs a transfer step before it (it acts on that transfer's verified source files)`);
          if (settledBy >= 0) throw new BadRequestError(`${at}: the source files of steps[${transferAt}] were already ${steps[settledBy]!.type === 'move_source' ? 'moved' : 'deleted'} by steps[${settledBy}]`);
          settledBy = i;
          if (step.type === 'delete_source') {
            out.push({ type: 'delete_source' });
            break;
          }
          if (typeof step.to !== 'string') throw new BadRequestError(`${at}.to must be a folder path on the source connection`);
          await this.checkPath(accountId, `${at}.to`, step.to);
          out.push({ type: 'move_source', to: step.to });
          break;
        }
        case 'notify': {
          if (step.to !== undefined) {
            throw new BadRequestError(`${at}.to: a notify step goes to the account's notification recipients (email: GET /notifications/settings; webhook_event: the webhooks subscribed to workflow.notify); per-step recipients are not supported`);
          }
          out.push({ type: 'notify', channel: step.channel!, ...(step.subject ? { subject: step.subject } : {}) });
          break;
        }
      }
    }
    return out;
  }

  private async checkPath(accountId: AccountId, field: string, text: string): Promise<void> {
    const problem = basePathProblem(text);
    if (problem) throw new BadRequestError(`${field} ${problem.replace(/^path /, '')}`);
    await this.o.parameters.checkTemplate(accountId, field, text, { run: true, file: true });
  }
}

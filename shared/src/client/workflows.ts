import type { Deleted, Page } from '../schemas/common.js';
import type {
  CreateWorkflowRequest, ListWorkflowRunsQuery, ListWorkflowsQuery, RunWorkflowRequest, UpdateWorkflowRequest, Workflow, WorkflowRun,
} from '../schemas/workflows.js';
import type { CallSettings } from './transport.js';
import type { PageIterator } from './paging.js';
import { Resource, seg } from './resource.js';

/** `/workflows` and `/workflow-runs`: ordered steps (transfer, move_source, delete_source, notify) run by hand, a schedule or a watcher. */
export class WorkflowsApi extends Resource {
  list(query?: ListWorkflowsQuery, s?: CallSettings): Promise<Page<Workflow>> { return this.page('/workflows', query, s); }
  all(query?: ListWorkflowsQuery, s?: CallSettings): PageIterator<Workflow> { return this.pager('/workflows', query, s); }
  get(id: string, s?: CallSettings): Promise<Workflow> { return this.data('GET', `/workflows/${seg(id)}`, s); }
  create(body: CreateWorkflowRequest, s?: CallSettings): Promise<Workflow> { return this.data('POST', '/workflows', { ...s, json: body }); }
  /** Changes the fields given; given `steps` replace all steps (runs under way keep theirs). */
  update(id: string, body: UpdateWorkflowRequest, s?: CallSettings): Promise<Workflow> {
    return this.data('PUT', `/workflows/${seg(id)}`, { ...s, json: body });
  }
  delete(id: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/workflows/${seg(id)}`, s); }
  /** Starts a run now; resolves with the run as it started, without waiting for it. */
  run(id: string, body: RunWorkflowRequest = {}, s?: CallSettings): Promise<WorkflowRun> {
    return this.data('POST', `/workflows/${seg(id)}/run`, { ...s, json: body });
  }
  /** The workflow's runs, newest first. */
  runs(id: string, query?: ListWorkflowRunsQuery, s?: CallSettings): Promise<Page<WorkflowRun>> { return this.page(`/workflows/${seg(id)}/runs`, query, s); }
  allRuns(id: string, query?: ListWorkflowRunsQuery, s?: CallSettings): PageIterator<WorkflowRun> { return this.pager(`/workflows/${seg(id)}/runs`, query, s); }
  /** One run, with the status of each step. */
  getRun(runId: string, s?: CallSettings): Promise<WorkflowRun> { return this.data('GET', `/workflow-runs/${seg(runId)}`, s); }
  /** Cancels a run: its running transfer is cancelled and the steps not started are not run. */
  cancelRun(runId: string, s?: CallSettings): Promise<WorkflowRun> { return this.data('POST', `/workflow-runs/${seg(runId)}/cancel`, s); }
}

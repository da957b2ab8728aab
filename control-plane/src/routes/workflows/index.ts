import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  CreateWorkflowRequest, Deleted, Envelope, IdParams, ListWorkflowRunsQuery, ListWorkflowsQuery, Page, RunWorkflowRequest,
  UpdateWorkflowRequest, Workflow, WorkflowRun,
} from '@xfer/shared';
import { principalOf, requireRunAuthorityFor } from '../../plugins/app/access/index.js';

const read = { access: { scope: 'workflows:read' } } as const;
const write = { access: { scope: 'workflows:write' } } as const;

/**
 * Workflows and their runs (scope-areas.md "Workflows"; docs/automation.md "Workflows"):
 * workflows:read for reads, workflows:write for the rest. Runs are advanced by
 * plugins/app/workflows/workflow-runs.ts on every instance.
 */
const workflows: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const resource = (id: string) => ({ type: 'workflow', id });

  /**
   * A workflow runs transfers and moves or deletes source files over the account's connections:
   * creating, changing or running one needs what running a workflow needs (the rule schedules
   * and watchers follow too), transfers:write besides workflows:write, or a key holding
   * workflows:write alone would run transfers it may not (docs/security.md "Escalation rules").
   * Deleting one and cancelling a run do not.
   */
  const needsTransfers = (request: FastifyRequest, action: string, id?: string) =>
    requireRunAuthorityFor(app.audit, request, 'A workflow', action, { runsWorkflow: true }, id ? resource(id) : undefined);

  app.get('/workflows', {
    schema: { querystring: ListWorkflowsQuery, response: { 200: Page(Workflow) } },
    config: read,
  }, async (request) => app.workflows.list(principalOf(request).accountId, request.query));

  app.post('/workflows', {
    schema: { body: CreateWorkflowRequest, response: { 201: Envelope(Workflow) } },
    config: write,
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    await needsTransfers(request, 'workflow.create');
    const workflow = await app.audit.change(request, (announce) => app.workflows.create(accountId, request.body, (id, details) => announce({
      action: 'workflow.create', outcome: 'success', resource: resource(id), details,
    })));
    return reply.code(201).send({ data: workflow });
  });

  app.get('/workflows/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Workflow) } },
    config: read,
  }, async (request) => ({ data: await app.workflows.get(principalOf(request).accountId, request.params.id) }));

  app.put('/workflows/:id', {
    schema: { params: IdParams, body: UpdateWorkflowRequest, response: { 200: Envelope(Workflow) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    await needsTransfers(request, 'workflow.update', request.params.id);
    const workflow = await app.audit.change(request, (announce) => app.workflows.update(accountId, request.params.id, request.body, (id, details) => announce({
      action: 'workflow.update', outcome: 'success', resource: resource(id), details,
    })));
    return { data: workflow };
  });

  /** 409 while a schedule or watcher names it, or a run is under way. */
  app.delete('/workflows/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const deleted = await app.audit.change(request, (announce) => app.workflows.delete(accountId, request.params.id, (id, details) => announce({
      action: 'workflow.delete', outcome: 'success', resource: resource(id), details,
    })));
    return { data: { id: deleted.id, deleted: true as const } };
  });

  /** Starts a run: 201 with the run once its first step started (a transfer step: its transfer queued, not waited for). */
  app.post('/workflows/:id/run', {
    schema: { params: IdParams, body: RunWorkflowRequest, response: { 201: Envelope(WorkflowRun) } },
    config: write,
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    await needsTransfers(request, 'workflow.run', request.params.id);
    const run = await app.workflows.runNow(accountId, request.params.id, request.body ?? {});
    await app.audit.recordRequest(request, {
      action: 'workflow.run', outcome: run.status === 'failed' ? 'failure' : 'success', resource: resource(request.params.id),
      details: { run_id: run.id, status: run.status, params: run.params, ...(run.error ? { error: run.error } : {}) },
    });
    return reply.code(201).send({ data: run });
  });

  app.get('/workflows/:id/runs', {
    schema: { params: IdParams, querystring: ListWorkflowRunsQuery, response: { 200: Page(WorkflowRun) } },
    config: read,
  }, async (request) => app.workflows.listRuns(principalOf(request).accountId, request.params.id, request.query));

  app.get('/workflow-runs/:id', {
    schema: { params: IdParams, response: { 200: Envelope(WorkflowRun) } },
    config: read,
  }, async (request) => ({ data: await app.workflows.getRun(principalOf(request).accountId, request.params.id) }));

  /** Cancels a queued or running run (409 once it ended): its running transfer is cancelled, later steps skipped. */
  app.post('/workflow-runs/:id/cancel', {
    schema: { params: IdParams, response: { 200: Envelope(WorkflowRun) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const run = await app.workflows.cancelRun(accountId, request.params.id);
    await app.audit.recordRequest(request, {
      action: 'workflow.cancel', outcome: 'success', resource: { type: 'workflow_run', id: run.id }, details: { workflow_id: run.workflow_id, status: run.status },
    });
    return { data: run };
  });
};

export default workflows;

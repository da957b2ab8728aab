import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  CreateScheduleRequest, Deleted, Envelope, IdParams, ListScheduleRunsQuery, ListSchedulesQuery, Page, Schedule, ScheduleRun, UpdateScheduleRequest,
} from '@xfer/shared';
import { ownerOf, principalOf, requireRunAuthorityFor } from '../../plugins/app/access/index.js';

const read = { access: { scope: 'schedules:read' } } as const;
const write = { access: { scope: 'schedules:write' } } as const;

/**
 * Schedules (scope-areas.md "Schedules"; docs/automation.md "Schedules"): schedules:read for
 * reads, schedules:write for the rest. Due times are fired by plugins/app/schedules/firing.ts on
 * every instance; `POST /schedules/:id/run` runs one now.
 */
const schedules: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const resource = (id: string) => ({ type: 'schedule', id });

  /**
   * A schedule runs transfers, or a workflow, later and with its owner's authority (who last
   * saved it): creating, changing or running one needs what running its definition (as it will
   * be) needs, transfers:write and for a workflow workflows:write, or a key holding
   * schedules:write alone would run what it may not (docs/security.md "Escalation rules").
   * Deleting one does not.
   */
  const needsToRun = (request: FastifyRequest, action: string, runsWorkflow: boolean, id?: string) =>
    requireRunAuthorityFor(app.audit, request, runsWorkflow ? 'A schedule of a workflow' : 'A schedule', action, { runsWorkflow }, id ? resource(id) : undefined);

  app.get('/schedules', {
    schema: { querystring: ListSchedulesQuery, response: { 200: Page(Schedule) } },
    config: read,
  }, async (request) => {
    const { accountId } = principalOf(request);
    return app.schedules.list(accountId, request.query);
  });

  app.post('/schedules', {
    schema: { body: CreateScheduleRequest, response: { 201: Envelope(Schedule) } },
    config: write,
  }, async (request, reply) => {
    const principal = principalOf(request);
    await needsToRun(request, 'schedule.create', request.body.workflowId !== undefined);
    const schedule = await app.audit.change(request, (announce) => app.schedules.create(principal.accountId, ownerOf(principal), request.body, (id, details) => announce({
      action: 'schedule.create', outcome: 'success', resource: resource(id), details,
    })));
    return reply.code(201).send({ data: schedule });
  });

  app.get('/schedules/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Schedule) } },
    config: read,
  }, async (request) => {
    const { accountId } = principalOf(request);
    return { data: await app.schedules.get(accountId, request.params.id) };
  });

  app.put('/schedules/:id', {
    schema: { params: IdParams, body: UpdateScheduleRequest, response: { 200: Envelope(Schedule) } },
    config: write,
  }, async (request) => {
    const principal = principalOf(request);
    const { accountId } = principal;
    const { body } = request;
    // The schedule as it will be: the caller becomes its owner, so it must hold what that needs.
    const runsWorkflow = body.workflowId !== undefined || (body.transfer === undefined && Boolean((await app.schedules.find(accountId, request.params.id)).workflow_id));
    await needsToRun(request, 'schedule.update', runsWorkflow, request.params.id);
    const { schedule } = await app.audit.change(request, (announce) => app.schedules.update(accountId, ownerOf(principal), request.params.id, body, (id, details) => announce({
      action: 'schedule.update', outcome: 'success', resource: resource(id), details,
    })));
    return { data: schedule };
  });

  app.delete('/schedules/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const deleted = await app.audit.change(request, (announce) => app.schedules.delete(accountId, request.params.id, (id, details) => announce({
      action: 'schedule.delete', outcome: 'success', resource: resource(id), details,
    })));
    return { data: { id: deleted.id, deleted: true as const } };
  });

  /** Runs the schedule now: 201 with the run (`skipped` under overlap skip, `failed` when no transfer could be made). */
  app.post('/schedules/:id/run', {
    schema: { params: IdParams, response: { 201: Envelope(ScheduleRun) } },
    config: write,
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    const current = await app.schedules.find(accountId, request.params.id);
    await needsToRun(request, 'schedule.run', Boolean(current.workflow_id), request.params.id);
    // The run itself also checks the schedule's owner (schedule-runs.ts): a run it refuses is recorded `denied`.
    const { run, denied } = await app.schedules.runNow(accountId, request.params.id);
    await app.audit.recordRequest(request, {
      action: 'schedule.run', outcome: denied ? 'denied' : run.status === 'failed' ? 'failure' : 'success', resource: resource(request.params.id),
      details: { run_id: run.id, transfer_id: run.transfer_id, status: run.status, ...(run.error ? { error: run.error } : {}), ...(denied ? { reason: 'owner authority' } : {}) },
    });
    return reply.code(201).send({ data: run });
  });

  /** The schedule's runs, newest first, each with its transfer's status as it is now. */
  app.get('/schedules/:id/runs', {
    schema: { params: IdParams, querystring: ListScheduleRunsQuery, response: { 200: Page(ScheduleRun) } },
    config: read,
  }, async (request) => {
    const { accountId } = principalOf(request);
    return app.schedules.listRuns(accountId, request.params.id, request.query);
  });
};

export default schedules;

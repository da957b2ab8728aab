import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  CreateTransferRequest, Deleted, Envelope, ExecuteTransferBody, ExecuteTransferQuery, ExecuteTransferResult, IdParams, ListTransferFilesQuery,
  ListTransfersQuery, Page, Transfer, TransferFile,
} from '@xfer/shared';
import { Type } from '@sinclair/typebox';
import { ServiceUnavailableError } from '../../errors.js';
import { mapPage } from '../../lib/pagination.js';
import { principalOf } from '../../plugins/app/access/index.js';
import { needsSync, stateConflict, transferNotFound, type StoredTransfer } from '../../plugins/app/transfers/index.js';
import plans from './plans.js';
import { executeResult, presentTransfer, presentTransferFile } from './transfers.presenter.js';

/**
 * Transfers (api.md "Transfers", decisions.md "Transfers"): transfers:read for reads,
 * transfers:write for the rest. A transfer runs on an agent; see plugins/app/agents/dispatch.ts
 * for how it gets there and plugins/app/transfers/ for its states.
 */
const transfers: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const resource = (id: string) => ({ type: 'transfer', id });
  /** One transfer's read shape, with its queue position when it waits. */
  const present = async (doc: StoredTransfer) => presentTransfer(doc, (await app.transfers.queuePositions([doc])).get(String(doc._id)) ?? null);

  app.get('/transfers', {
    schema: { querystring: ListTransfersQuery, response: { 200: Page(Transfer) } },
    config: { access: { scope: 'transfers:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const page = await app.transfers.list(accountId, request.query);
    const positions = await app.transfers.queuePositions(page.data);
    return mapPage(page, (doc) => presentTransfer(doc, positions.get(String(doc._id)) ?? null));
  });

  app.post('/transfers', {
    schema: { body: CreateTransferRequest, response: { 201: Envelope(Transfer) } },
    config: { access: { scope: 'transfers:write' } },
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    const job = presentTransfer(await app.transfers.create(accountId, request.body));
    await app.audit.recordRequest(request, {
      action: 'transfer.create', outcome: 'success', resource: resource(job.id),
      details: { name: job.name, source_connection_id: job.sourceConnectionId, destination_connection_id: job.destinationConnectionId },
    });
    return reply.code(201).send({ data: job });
  });

  app.get('/transfers/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Transfer) } },
    config: { access: { scope: 'transfers:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    return { data: await present(await app.transfers.find(accountId, request.params.id)) };
  });

  /**
   * Makes a created (or retried) transfer wait for an agent: 503 (or 409) when no online agent,
   * nor a relay pair, could ever run it now; otherwise it waits in its account's queue until an
   * eligible agent has a free slot (plugins/app/agents/scheduler.ts). Blocks until the transfer
   * ends and answers the bare summary, or with `?wait=false` answers 202 with it at once. A
   * client that goes away stops only its own wait, never the transfer. With `{plan_id}` the run
   * applies exactly that plan (plans.ts; 404/409/410 when it cannot), on one agent with `hello.sync`.
   */
  app.post('/transfers/:id/execute', {
    schema: {
      params: IdParams, querystring: ExecuteTransferQuery, body: Type.Union([ExecuteTransferBody, Type.Null()]),
      response: { 200: ExecuteTransferResult, 202: Envelope(Transfer) },
    },
    config: { access: { scope: 'transfers:write' } },
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    const job = await app.transfers.find(accountId, request.params.id);
    if (job.status !== 'queued' || job.queued_at) throw stateConflict(job, 'executed', 'queued');
    const planId = request.body?.plan_id;
    const plan = planId ? await app.plans.executable(accountId, job, planId) : null;
    await app.agents.assertRunnable(accountId, await app.transfers.connectionsOf(job), app.dispatcher.relays, { sync: needsSync(job.options, plan?._id), direct: !!plan });
    const waiting = await app.transfers.enqueue(job, plan?._id ?? null);
    if (!waiting) throw stateConflict(await app.transfers.find(accountId, request.params.id), 'executed', 'queued');
    app.dispatcher.wake();
    await app.audit.recordRequest(request, {
      action: 'transfer.execute', outcome: 'success', resource: resource(String(job._id)),
      details: { name: job.name, attempt: waiting.attempt, ...(plan ? { plan_id: String(plan._id) } : {}) },
    });
    if (request.query.wait === false) return reply.code(202).send({ data: await present(waiting) });

    const clientGone = new AbortController();
    reply.raw.on('close', () => clientGone.abort());
    const ended = await app.transfers.waitForEnd(job._id, AbortSignal.any([clientGone.signal, app.dispatcher.stopping]));
    if (ended) return executeResult(ended);
    if (clientGone.signal.aborted) {
      // Nobody is left to answer; the job carries on.
      reply.hijack();
      reply.raw.destroy();
      return;
    }
    if (app.dispatcher.stopping.aborted) {
      throw new ServiceUnavailableError(`The server is shutting down; transfer ${String(job._id)} carries on: follow it with GET /transfers/${String(job._id)}`);
    }
    throw transferNotFound(request.params.id);
  });

  /** queued (waiting or not) or in-progress → cancelled; the agent of a running job is told to stop and clean up. */
  app.post('/transfers/:id/cancel', {
    schema: { params: IdParams, response: { 200: Envelope(Transfer) } },
    config: { access: { scope: 'transfers:write' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const job = await app.transfers.find(accountId, request.params.id);
    const cancelled = await app.transfers.cancel(accountId, job._id);
    if (!cancelled) throw stateConflict(await app.transfers.find(accountId, request.params.id), 'cancelled', 'queued or in-progress');
    app.dispatcher.wake();
    await app.audit.recordRequest(request, {
      action: 'transfer.cancel', outcome: 'success', resource: resource(String(job._id)),
      details: { name: job.name, was: job.status, agent_id: job.agent_id ? String(job.agent_id) : null },
    });
    return { data: presentTransfer(cancelled) };
  });

  /** failed or cancelled → queued (not waiting: execute it again) as the next attempt, which resumes from the earlier attempts' results. */
  app.post('/transfers/:id/retry', {
    schema: { params: IdParams, response: { 200: Envelope(Transfer) } },
    config: { access: { scope: 'transfers:write' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const job = await app.transfers.find(accountId, request.params.id);
    const retried = await app.transfers.retry(accountId, job._id);
    if (!retried) throw stateConflict(await app.transfers.find(accountId, request.params.id), 'retried', 'failed or cancelled');
    await app.audit.recordRequest(request, {
      action: 'transfer.retry', outcome: 'success', resource: resource(String(job._id)), details: { name: job.name, attempt: retried.attempt },
    });
    return { data: presentTransfer(retried) };
  });

  app.delete('/transfers/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: { access: { scope: 'transfers:write' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const job = await app.transfers.find(accountId, request.params.id);
    const removed = await app.transfers.remove(accountId, job._id);
    if (!removed) throw stateConflict(await app.transfers.find(accountId, request.params.id), 'deleted', 'completed, failed or cancelled');
    await app.audit.recordRequest(request, {
      action: 'transfer.delete', outcome: 'success', resource: resource(String(job._id)), details: { name: job.name, status: removed.status },
    });
    return { data: { id: String(job._id), deleted: true as const } };
  });

  /** Per-file results of every run, newest first; `?attempt=` and `?status=` narrow them. */
  app.get('/transfers/:id/files', {
    schema: { params: IdParams, querystring: ListTransferFilesQuery, response: { 200: Page(TransferFile) } },
    config: { access: { scope: 'transfers:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const job = await app.transfers.find(accountId, request.params.id);
    return mapPage(await app.transfers.listFiles(job, request.query), presentTransferFile);
  });

  await app.register(plans);
};

export default transfers;

import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  CreateTransferRequest, Deleted, Envelope, ExecuteTransferQuery, ExecuteTransferResult, IdParams, ListTransferFilesQuery,
  ListTransfersQuery, Page, Transfer, TransferFile,
} from '@xfer/shared';
import { ServiceUnavailableError } from '../../errors.js';
import { paginate } from '../../lib/pagination.js';
import { principalOf } from '../../plugins/app/auth.js';
import { chooseAgent } from '../../plugins/app/agents/agents.service.js';
import {
  createTransfer, executeResult, findTransfer, jobConnections, presentTransfer, presentTransferFile, stateConflict,
  transferNotFound, waitForEnd,
} from '../../plugins/app/transfers/transfers.service.js';

/**
 * Transfer jobs (api.md "Transfers", decisions.md "Transfers"): transfers:read for reads,
 * transfers:write for the rest. A job runs on an agent; see plugins/app/dispatcher.ts for how
 * it gets there and plugins/app/jobs/job-service.ts for the state machine.
 */
const transfers: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const pollMs = app.config.dispatchPollMs;
  const resource = (id: string) => ({ type: 'transfer', id });

  app.get('/transfers', {
    schema: { querystring: ListTransfersQuery, response: { 200: Page(Transfer) } },
    config: { access: { scope: 'transfers:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const { status, ...page } = request.query;
    return paginate(app.db.transfers, { account_id: accountId, ...(status ? { status } : {}) }, page, presentTransfer);
  });

  app.post('/transfers', {
    schema: { body: CreateTransferRequest, response: { 201: Envelope(Transfer) } },
    config: { access: { scope: 'transfers:write' } },
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    const job = presentTransfer(await createTransfer(app.db, accountId, request.body));
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
    return { data: presentTransfer(await findTransfer(app.db, accountId, request.params.id)) };
  });

  /**
   * queued → in-progress on the chosen agent. Blocks until the job ends and answers the bare
   * summary, or with `?wait=false` answers 202 with the job at once. A client that goes away
   * stops only its own wait, never the job.
   */
  app.post('/transfers/:id/execute', {
    schema: { params: IdParams, querystring: ExecuteTransferQuery, response: { 200: ExecuteTransferResult, 202: Envelope(Transfer) } },
    config: { access: { scope: 'transfers:write' } },
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    const job = await findTransfer(app.db, accountId, request.params.id);
    if (job.status !== 'queued') throw stateConflict(job, 'executed', 'queued');
    const agent = await chooseAgent(app.db, accountId, await jobConnections(app.db, job), pollMs);
    const started = await app.jobs.start(job, agent._id);
    if (!started) throw stateConflict(await findTransfer(app.db, accountId, request.params.id), 'executed', 'queued');
    app.dispatcher.wake();
    await app.audit.recordRequest(request, {
      action: 'transfer.execute', outcome: 'success', resource: resource(String(job._id)),
      details: { name: job.name, attempt: started.attempt, agent_id: String(agent._id) },
    });
    if (request.query.wait === false) return reply.code(202).send({ data: presentTransfer(started) });

    const clientGone = new AbortController();
    reply.raw.on('close', () => clientGone.abort());
    const ended = await waitForEnd(app.db, app.jobs, job._id, pollMs, AbortSignal.any([clientGone.signal, app.dispatcher.stopping]));
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

  /** queued or in-progress → cancelled; the agent of a running job is told to stop and clean up. */
  app.post('/transfers/:id/cancel', {
    schema: { params: IdParams, response: { 200: Envelope(Transfer) } },
    config: { access: { scope: 'transfers:write' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const job = await findTransfer(app.db, accountId, request.params.id);
    const cancelled = await app.jobs.cancel(accountId, job._id);
    if (!cancelled) throw stateConflict(await findTransfer(app.db, accountId, request.params.id), 'cancelled', 'queued or in-progress');
    app.dispatcher.wake();
    await app.audit.recordRequest(request, {
      action: 'transfer.cancel', outcome: 'success', resource: resource(String(job._id)),
      details: { name: job.name, was: job.status, agent_id: job.agent_id ? String(job.agent_id) : null },
    });
    return { data: presentTransfer(cancelled) };
  });

  /** failed or cancelled → queued as the next attempt; its run skips files already at the destination. */
  app.post('/transfers/:id/retry', {
    schema: { params: IdParams, response: { 200: Envelope(Transfer) } },
    config: { access: { scope: 'transfers:write' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const job = await findTransfer(app.db, accountId, request.params.id);
    const retried = await app.jobs.retry(accountId, job._id);
    if (!retried) throw stateConflict(await findTransfer(app.db, accountId, request.params.id), 'retried', 'failed or cancelled');
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
    const job = await findTransfer(app.db, accountId, request.params.id);
    const removed = await app.jobs.remove(accountId, job._id);
    if (!removed) throw stateConflict(await findTransfer(app.db, accountId, request.params.id), 'deleted', 'completed, failed or cancelled');
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
    const job = await findTransfer(app.db, accountId, request.params.id);
    const { status, attempt, ...page } = request.query;
    const filter = { job_id: job._id, ...(status ? { status } : {}), ...(attempt ? { attempt } : {}) };
    return paginate(app.db.transferFiles, filter, page, presentTransferFile);
  });
};

export default transfers;

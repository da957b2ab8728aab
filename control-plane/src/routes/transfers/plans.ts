import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  CreatePlanQuery, Envelope, IdParams, ListPlanItemsQuery, Page, TransferPlan, TransferPlanItem, type PlanSummary,
} from '@xfer/shared';
import { ServiceUnavailableError } from '../../errors.js';
import { principalOf } from '../../plugins/app/access/index.js';
import { transferNotFound } from '../../plugins/app/transfers/index.js';
import type { StoredPlan } from '../../plugins/app/plans/index.js';

/** The read shape of a plan. */
export function presentPlan(plan: StoredPlan, now = Date.now()): TransferPlan {
  return {
    id: String(plan._id),
    transferId: String(plan.transfer_id),
    status: plan.status as TransferPlan['status'],
    summary: (plan.summary as PlanSummary | null) ?? null,
    fingerprint: plan.fingerprint ?? null,
    agent_id: plan.agent_id ? String(plan.agent_id) : null,
    error: plan.error ?? null,
    created_at: plan.created_at.toISOString(),
    expires_at: plan.expires_at.toISOString(),
    expired: plan.expires_at.getTime() <= now,
  };
}

/**
 * Plans of a transfer (docs/api.md "Sync, move and plans"): making one needs what executing needs
 * (transfers:write: an agent lists both connections with their credentials), reading one what
 * reading the transfer needs (transfers:read). The execute of a plan is `POST /transfers/:id/execute
 * {plan_id}` (index.ts).
 */
const plans: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  /**
   * Computes a new plan on an agent serving both connections; blocks until it is ready or failed
   * (200 either way: the plan's status and error say which), or with `?wait=false` answers 202 at once.
   */
  app.post('/transfers/:id/plan', {
    schema: { params: IdParams, querystring: CreatePlanQuery, response: { 200: Envelope(TransferPlan), 202: Envelope(TransferPlan) } },
    config: { access: { scope: 'transfers:write' } },
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    const job = await app.transfers.find(accountId, request.params.id);
    const plan = await app.plans.create(accountId, job);
    await app.audit.recordRequest(request, {
      action: 'transfer.plan', outcome: 'success', resource: { type: 'transfer', id: String(job._id) },
      details: { name: job.name, plan_id: String(plan._id), agent_id: plan.agent_id ? String(plan.agent_id) : null },
    });
    if (request.query.wait === false) return reply.code(202).send({ data: presentPlan(plan) });
    const clientGone = new AbortController();
    reply.raw.on('close', () => clientGone.abort());
    const ended = await app.plans.waitForEnd(plan._id, AbortSignal.any([clientGone.signal, app.dispatcher.stopping]));
    if (clientGone.signal.aborted) {
      reply.hijack();
      reply.raw.destroy();
      return;
    }
    if (ended && ended.status !== 'planning') return { data: presentPlan(ended) };
    if (!ended) throw transferNotFound(request.params.id);
    throw new ServiceUnavailableError(`The server is shutting down; plan ${String(plan._id)} carries on: follow it with GET /transfers/${String(job._id)}/plan`);
  });

  app.get('/transfers/:id/plan', {
    schema: { params: IdParams, response: { 200: Envelope(TransferPlan) } },
    config: { access: { scope: 'transfers:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const job = await app.transfers.find(accountId, request.params.id);
    return { data: presentPlan(await app.plans.latest(job)) };
  });

  /** The latest plan's items in path order; `?action=` narrows them. */
  app.get('/transfers/:id/plan/items', {
    schema: { params: IdParams, querystring: ListPlanItemsQuery, response: { 200: Page(TransferPlanItem) } },
    config: { access: { scope: 'transfers:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const job = await app.transfers.find(accountId, request.params.id);
    return app.plans.items(await app.plans.latest(job), request.query);
  });
};

export default plans;

import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ActivityQuery, ActivitySummary, ActivitySummaryQuery, Envelope } from '@xfer/shared';
import { principalOf } from '../../plugins/app/access/index.js';

/** GET /activity: the caller's account's audit trail, newest first (decisions.md "Audit and rate limits"); GET /activity/summary: its dashboard counters. */
const activity: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/activity', {
    schema: { querystring: ActivityQuery },
    config: { access: { scope: 'activity:read' } },
  }, async (request) => app.activity.list(principalOf(request).accountId, request.query));

  /** The dashboard counters (activity.service.ts `summary`): reads only. */
  app.get('/activity/summary', {
    schema: { querystring: ActivitySummaryQuery, response: { 200: Envelope(ActivitySummary) } },
    config: { access: { scope: 'activity:read' } },
  }, async (request) => ({ data: await app.activity.summary(principalOf(request).accountId, request.query) }));
};

export default activity;

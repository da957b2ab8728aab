import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ActivityQuery } from '@xfer/shared';
import { principalOf } from '../../plugins/app/access/index.js';

/** GET /activity: the caller's account's audit trail, newest first (decisions.md "Audit and rate limits"). */
const activity: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/activity', {
    schema: { querystring: ActivityQuery },
    config: { access: { scope: 'activity:read' } },
  }, async (request) => app.activity.list(principalOf(request).accountId, request.query));
};

export default activity;

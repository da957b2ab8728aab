import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ActivityQuery } from '@xfer/shared';
import { paginate } from '../../lib/pagination.js';
import { principalOf } from '../../plugins/app/access/index.js';
import { activityFilter, presentAuditEvent } from '../../plugins/app/activity/activity.service.js';

/** GET /activity: the caller's account's audit trail, newest first (decisions.md "Audit and rate limits"). */
const activity: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/activity', {
    schema: { querystring: ActivityQuery },
    config: { access: { scope: 'activity:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    return paginate(app.db.auditEvents, activityFilter(accountId, request.query), request.query, presentAuditEvent);
  });
};

export default activity;

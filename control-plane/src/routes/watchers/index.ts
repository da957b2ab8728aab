import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  CreateWatcherRequest, Deleted, Envelope, IdParams, ListWatcherEventsQuery, ListWatchersQuery, Page, UpdateWatcherRequest, Watcher, WatcherEvent,
} from '@xfer/shared';
import { ownerOf, principalOf, requireRunAuthorityFor } from '../../plugins/app/access/index.js';

const read = { access: { scope: 'watchers:read' } } as const;
const write = { access: { scope: 'watchers:write' } } as const;

/**
 * Watchers (scope-areas.md "Watchers"; docs/automation.md "Watchers"): watchers:read for reads,
 * watchers:write for the rest. The agent serving a watcher's connection polls it
 * (plugins/app/watchers/assignments.ts); each new file version runs the action once (watcher-events.ts).
 */
const watchers: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  const resource = (id: string) => ({ type: 'watcher', id });

  /**
   * A watcher runs transfers, or a workflow, later and with its owner's authority (who last saved
   * it): creating or changing one needs what running its action (as it will be) needs,
   * transfers:write and for a workflow workflows:write (docs/security.md "Escalation rules").
   */
  const needsToRun = (request: FastifyRequest, action: string, runsWorkflow: boolean, id?: string) =>
    requireRunAuthorityFor(app.audit, request, runsWorkflow ? 'A watcher of a workflow' : 'A watcher', action, { runsWorkflow }, id ? resource(id) : undefined);

  app.get('/watchers', {
    schema: { querystring: ListWatchersQuery, response: { 200: Page(Watcher) } },
    config: read,
  }, async (request) => app.watchers.list(principalOf(request).accountId, request.query));

  app.post('/watchers', {
    schema: { body: CreateWatcherRequest, response: { 201: Envelope(Watcher) } },
    config: write,
  }, async (request, reply) => {
    const principal = principalOf(request);
    await needsToRun(request, 'watcher.create', request.body.action?.workflowId !== undefined);
    const watcher = await app.audit.change(request, (announce) => app.watchers.create(principal.accountId, ownerOf(principal), request.body, (id, details) => announce({
      action: 'watcher.create', outcome: 'success', resource: resource(id), details,
    })));
    return reply.code(201).send({ data: watcher });
  });

  app.get('/watchers/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Watcher) } },
    config: read,
  }, async (request) => ({ data: await app.watchers.get(principalOf(request).accountId, request.params.id) }));

  app.put('/watchers/:id', {
    schema: { params: IdParams, body: UpdateWatcherRequest, response: { 200: Envelope(Watcher) } },
    config: write,
  }, async (request) => {
    const principal = principalOf(request);
    const { accountId } = principal;
    const { action } = request.body;
    // The watcher as it will be: the caller becomes its owner, so it must hold what that needs.
    const runsWorkflow = action ? action.workflowId !== undefined : Boolean((await app.watchers.find(accountId, request.params.id)).workflow_id);
    await needsToRun(request, 'watcher.update', runsWorkflow, request.params.id);
    const { watcher } = await app.audit.change(request, (announce) => app.watchers.update(accountId, ownerOf(principal), request.params.id, request.body, (id, details) => announce({
      action: 'watcher.update', outcome: 'success', resource: resource(id), details,
    })));
    return { data: watcher };
  });

  app.delete('/watchers/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const deleted = await app.audit.change(request, (announce) => app.watchers.delete(accountId, request.params.id, (id, details) => announce({
      action: 'watcher.delete', outcome: 'success', resource: resource(id), details,
    })));
    return { data: { id: deleted.id, deleted: true as const } };
  });

  /** The file versions the watcher saw, newest first, each with its action's status as it is now. */
  app.get('/watchers/:id/events', {
    schema: { params: IdParams, querystring: ListWatcherEventsQuery, response: { 200: Page(WatcherEvent) } },
    config: read,
  }, async (request) => app.watchers.listEvents(principalOf(request).accountId, request.params.id, request.query));
};

export default watchers;

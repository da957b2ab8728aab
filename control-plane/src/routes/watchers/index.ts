import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  CreateWatcherRequest, Deleted, Envelope, IdParams, ListWatcherEventsQuery, ListWatchersQuery, Page, UpdateWatcherRequest, Watcher, WatcherEvent,
} from '@xfer/shared';
import { principalOf, requireTransfersWriteFor } from '../../plugins/app/access/index.js';

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

  /** A watcher runs transfers over the account's connections, later and as the system: creating or changing one also needs transfers:write. */
  const needsTransfers = (request: FastifyRequest, action: string, id?: string) =>
    requireTransfersWriteFor(app.audit, request, 'A watcher', action, id ? resource(id) : undefined);

  app.get('/watchers', {
    schema: { querystring: ListWatchersQuery, response: { 200: Page(Watcher) } },
    config: read,
  }, async (request) => app.watchers.list(principalOf(request).accountId, request.query));

  app.post('/watchers', {
    schema: { body: CreateWatcherRequest, response: { 201: Envelope(Watcher) } },
    config: write,
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    await needsTransfers(request, 'watcher.create');
    const watcher = await app.audit.change(request, (announce) => app.watchers.create(accountId, request.body, (id, details) => announce({
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
    const { accountId } = principalOf(request);
    await needsTransfers(request, 'watcher.update', request.params.id);
    const { watcher } = await app.audit.change(request, (announce) => app.watchers.update(accountId, request.params.id, request.body, (id, details) => announce({
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

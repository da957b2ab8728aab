import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { CreateUserRequest, Deleted, Envelope, IdParams, Page, PageQuery, UpdateUserRequest, User } from '@xfer/shared';
import { principalOf } from '../../plugins/app/access/index.js';

/**
 * Users of the caller's account (users:read for reads, users:write for changes). The rules
 * (owners, the last owner, no escalation, sessions ended by a password change) are the users
 * service's (plugins/app/access/users.service.ts).
 */
const users: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/users', {
    schema: { querystring: PageQuery, response: { 200: Page(User) } },
    config: { access: { scope: 'users:read' } },
  }, async (request) => app.users.list(principalOf(request).accountId, request.query));

  app.post('/users', {
    schema: { body: CreateUserRequest, response: { 201: Envelope(User) } },
    config: { access: { scope: 'users:write' } },
  }, async (request, reply) => {
    const user = await app.users.create(principalOf(request), request, request.body);
    return reply.code(201).send({ data: user });
  });

  app.get('/users/:id', {
    schema: { params: IdParams, response: { 200: Envelope(User) } },
    config: { access: { scope: 'users:read' } },
  }, async (request) => ({ data: await app.users.get(principalOf(request).accountId, request.params.id) }));

  app.put('/users/:id', {
    schema: { params: IdParams, body: UpdateUserRequest, response: { 200: Envelope(User) } },
    config: { access: { scope: 'users:write' } },
  }, async (request) => ({ data: await app.users.update(principalOf(request), request, request.params.id, request.body) }));

  app.delete('/users/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: { access: { scope: 'users:write' } },
  }, async (request) => {
    const { id } = await app.users.delete(principalOf(request), request, request.params.id);
    return { data: { id, deleted: true as const } };
  });
};

export default users;

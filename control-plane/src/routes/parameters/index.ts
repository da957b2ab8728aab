import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  CreateParameterRequest, Deleted, Envelope, IdParams, ListParametersQuery, Page, Parameter, UpdateParameterRequest,
} from '@xfer/shared';
import { principalOf } from '../../plugins/app/access/index.js';
import type { ParameterSubject } from '../../plugins/app/parameters/index.js';

const read = { access: { scope: 'parameters:read' } } as const;
const write = { access: { scope: 'parameters:write' } } as const;
const resource = (id: string) => ({ type: 'parameter', id });
/** What an audit record says about a parameter: its name and kind, never its value. */
const details = ({ name, secret, changed }: ParameterSubject) => ({ name, secret, ...(changed ? { changed } : {}) });

/**
 * Global parameters (scope-areas.md "Global parameters"; docs/api.md "Parameters";
 * docs/automation.md "Global parameters and templates"). A secret value is write-only: the read
 * shape has `value: null, has_value: true` for it, and audit records carry names only.
 */
const parameters: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/parameters', {
    schema: { querystring: ListParametersQuery, response: { 200: Page(Parameter) } },
    config: read,
  }, async (request) => {
    const { accountId } = principalOf(request);
    return app.parameters.list(accountId, request.query);
  });

  app.post('/parameters', {
    schema: { body: CreateParameterRequest, response: { 201: Envelope(Parameter) } },
    config: write,
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    const parameter = await app.audit.change(request, (announce) => app.parameters.create(accountId, request.body, (subject) => announce({
      action: 'parameter.create', outcome: 'success', resource: resource(subject.id), details: details(subject),
    })));
    return reply.code(201).send({ data: parameter });
  });

  app.get('/parameters/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Parameter) } },
    config: read,
  }, async (request) => {
    const { accountId } = principalOf(request);
    return { data: await app.parameters.get(accountId, request.params.id) };
  });

  app.put('/parameters/:id', {
    schema: { params: IdParams, body: UpdateParameterRequest, response: { 200: Envelope(Parameter) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const parameter = await app.audit.change(request, (announce) => app.parameters.update(accountId, request.params.id, request.body, (subject) => announce({
      action: 'parameter.update', outcome: 'success', resource: resource(subject.id), details: details(subject),
    })));
    return { data: parameter };
  });

  app.delete('/parameters/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: write,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const deleted = await app.audit.change(request, (announce) => app.parameters.remove(accountId, request.params.id, (subject) => announce({
      action: 'parameter.delete', outcome: 'success', resource: resource(subject.id), details: details(subject),
    })));
    return { data: { id: deleted.id, deleted: true as const } };
  });
};

export default parameters;

import fp from 'fastify-plugin';
import type { FastifyPluginAsync, FastifySchema, RouteOptions } from 'fastify';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import { ErrorBody } from '@xfer/shared';
import { MULTIPART_FIELD_MAX_BYTES } from '../external/multipart.js';
import type { RouteAccess } from './access/index.js';

/** Where the document and its rendering are served (both public: the API's shape is no secret). */
const API_PREFIX = '/api/v1';
export const OPENAPI_URL = `${API_PREFIX}/openapi.json`;
export const DOCS_PREFIX = `${API_PREFIX}/docs`;

const SECURITY_SCHEME = 'bearer';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route also takes a request without a body (it then uses its body's defaults). */
    optionalBody?: true;
  }
}

/**
 * Every error status answers `{error}` and nothing else (plugins/app/error-handler.ts): one schema
 * for all of them, closed so that a conformance check catches an extra field.
 */
const ERROR_RESPONSE = { ...ErrorBody, additionalProperties: false, description: 'Error: `{"error": "<message naming the field>"}`' };
/**
 * The form of a multipart route (POST /files/upload): it reads its parts as streams, so it has no
 * body schema to validate with; plugins/external/multipart.ts sets the limits described here.
 */
const MULTIPART_FORM = {
  type: 'object',
  required: ['file'],
  properties: {
    file: { type: 'string', format: 'binary', description: 'The content; its file name is the record\'s name' },
    path: { type: 'string', maxLength: MULTIPART_FIELD_MAX_BYTES, description: 'Folder of the file (default /)' },
  },
};

/**
 * A route that declares no success schema (a download) still documents that it succeeds; `type:
 * 'null'` is @fastify/swagger's way to say "no content described".
 */
const SUCCESS_RESPONSE = { type: 'null', description: 'Success (body not described)' };

/**
 * What the document adds to a route's own schema: its security (from `config.access`, the same
 * declaration auth.ts enforces), the `{error}` body for the error statuses it does not declare
 * itself, a bare 2XX when it declares no success, an operationId, and the multipart form of a
 * route that `consumes` one. Only the document changes: validation and serialization use the
 * route's own schema.
 */
function documented(schema: FastifySchema | undefined, access: RouteAccess | undefined, method: string, url: string): FastifySchema {
  const own = (schema?.response ?? {}) as Record<string, unknown>;
  const success = Object.keys(own).some((status) => status.startsWith('2')) ? {} : { '2XX': SUCCESS_RESPONSE };
  const response = { ...success, '4XX': ERROR_RESPONSE, '5XX': ERROR_RESPONSE, ...own };
  const multipart = (schema as { consumes?: string[] } | undefined)?.consumes?.includes('multipart/form-data') && !schema?.body;
  return {
    ...schema,
    ...(multipart ? { body: MULTIPART_FORM } : {}),
    operationId: operationId(method, url),
    response,
    security: access?.public ? [] : [{ [SECURITY_SCHEME]: [] }],
  };
}

/** `getTransfersIdFiles` for GET /api/v1/transfers/:id/files: a stable name for links and client generators. */
export function operationId(method: string, url: string): string {
  const words = url.slice(API_PREFIX.length).split(/[^A-Za-z0-9]+/).filter(Boolean);
  return method.toLowerCase() + words.map((w) => w[0]!.toUpperCase() + w.slice(1)).join('');
}

interface JsonSchema { properties?: Record<string, JsonSchema>; allOf?: JsonSchema[] }
interface Operation {
  operationId?: string;
  requestBody?: { required?: boolean };
  parameters?: Array<{ in: string; name: string }>;
  responses?: Record<string, { content?: Record<string, { schema?: JsonSchema }>; links?: Record<string, unknown> }>;
}

/** A property of an object schema, also when the object is an intersection (`allOf`). */
function propertyOf(schema: JsonSchema | undefined, name: string): JsonSchema | undefined {
  return schema?.properties?.[name] ?? schema?.allOf?.map((part) => propertyOf(part, name)).find(Boolean);
}

/**
 * OpenAPI links from each create (a POST answering 201 `{data: {id}}`) to the operations on the
 * resource it made (`<collection>/{id}…`; `/files/upload` creates under `/files`), so that
 * clients and schemathesis' stateful phase can follow a create to what it created.
 */
function addLinks(paths: Record<string, Record<string, Operation>>): void {
  for (const [source, ops] of Object.entries(paths)) {
    const created = ops.post?.responses?.['201'];
    if (!created || !propertyOf(propertyOf(created.content?.['application/json']?.schema, 'data'), 'id')) continue;
    const base = source.replace(/\/upload$/, '');
    for (const [target, targetOps] of Object.entries(paths)) {
      const param = target.startsWith(`${base}/{`) ? /^\{(\w+)\}(?:\/|$)/.exec(target.slice(base.length + 1))?.[1] : undefined;
      if (!param) continue;
      for (const op of Object.values(targetOps)) {
        if (!op.operationId) continue;
        const parameters: Record<string, string> = { [param]: '$response.body#/data/id' };
        const others = (op.parameters ?? []).filter((p) => p.in === 'path' && p.name !== param).map((p) => p.name);
        // The other path parameters come from the create's own path; a target needing more is not linked.
        if (others.some((name) => !source.includes(`{${name}}`))) continue;
        for (const name of others) parameters[name] = `$request.path.${name}`;
        created.links = { ...created.links, [op.operationId]: { operationId: op.operationId, parameters } };
      }
    }
  }
}

/**
 * The OpenAPI 3.1 document, generated by @fastify/swagger from the TypeBox schemas the routes
 * validate with (never written by hand). Registered before auth and the routes: @fastify/swagger
 * collects routes as they are added, and the hook below gives @fastify/swagger-ui's routes (which
 * take no route config) their public access before auth.ts checks that every /api/v1 route has one.
 */
export default fp(
  async (app) => {
    // @fastify/swagger marks every request body required; routes that take none say so in their config.
    const optionalBodies = new Set<string>();
    app.addHook('onRoute', (route: RouteOptions) => {
      // Only the docs' own pages (@fastify/swagger-ui and @fastify/static mark theirs hidden from
      // the document): any other route under the prefix must still declare its access.
      const hidden = (route.schema as { hide?: boolean } | undefined)?.hide === true;
      if (route.url.startsWith(DOCS_PREFIX) && hidden && !route.config?.access) {
        route.config = { ...route.config, access: { public: true } };
      }
    });
    await app.register(fastifySwagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'xfer API',
          version: '1',
          description: 'Secure file transfer. Authenticate with `Authorization: Bearer <API key or session token>`. '
            + 'Every error answers `{"error": "<message>"}`.',
        },
        components: {
          securitySchemes: {
            [SECURITY_SCHEME]: { type: 'http', scheme: 'bearer', description: 'An API key (`svc_…`) or a console session token' },
          },
        },
      },
      transform: ({ schema, url, route }) => {
        const method = [route.method].flat()[0]!;
        if (route.config?.optionalBody) optionalBodies.add(operationId(method, url));
        return { schema: documented(schema, route.config?.access, method, url), url };
      },
      transformObject: (documentObject) => {
        const document = (documentObject as { openapiObject: { paths?: Record<string, Record<string, Operation>> } }).openapiObject;
        const paths = document.paths ?? {};
        for (const op of Object.values(paths).flatMap((ops) => Object.values(ops))) {
          if (op.requestBody && optionalBodies.has(op.operationId!)) op.requestBody.required = false;
        }
        addLinks(paths);
        return document;
      },
    });
  },
  { name: 'openapi' },
);

/** `GET /openapi.json` and the rendered document under `/docs` (assets served from the package, no CDN). */
export const openapiRoutes: FastifyPluginAsync = async (app) => {
  app.get('/openapi.json', { config: { access: { public: true } } }, async () => app.swagger());
  // indexPrefix: the page links its assets by absolute path when asked for without a trailing slash.
  await app.register(fastifySwaggerUi, { routePrefix: DOCS_PREFIX.slice(API_PREFIX.length), indexPrefix: API_PREFIX });
};

import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import fastifyJwt from '@fastify/jwt';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { randomUUID } from 'node:crypto';
import { fastifyTrustProxy, type Config } from './config.js';
import { vaultOf, type Vault } from './lib/vault.js';
import { systemKeyOf } from './lib/system-keys.js';
import mongoosePlugin from './plugins/external/mongoose.js';
import errorHandler from './plugins/app/error-handler.js';
import accessPlugin from './plugins/app/access/index.js';
import activityPlugin from './plugins/app/activity/index.js';
import websocketPlugin from './plugins/external/websocket.js';
import multipartPlugin from './plugins/external/multipart.js';
import webhooksPlugin from './plugins/app/webhooks/index.js';
import filesPlugin from './plugins/app/files/index.js';
import connectionsPlugin from './plugins/app/connections/index.js';
import parametersPlugin from './plugins/app/parameters/index.js';
import transfersPlugin from './plugins/app/transfers/index.js';
import agentsPlugin from './plugins/app/agents/index.js';
import relayPlugin from './plugins/app/relay/index.js';
import plansPlugin from './plugins/app/plans/index.js';
import workflowsPlugin from './plugins/app/workflows/index.js';
import schedulesPlugin from './plugins/app/schedules/index.js';
import watchersPlugin from './plugins/app/watchers/index.js';
import dataRoomsPlugin from './plugins/app/data-rooms/index.js';
import notificationsPlugin from './plugins/app/notifications/index.js';
import metricsPlugin from './plugins/app/metrics/index.js';
import retentionPlugin from './plugins/app/retention/index.js';
import instancesPlugin from './plugins/app/instances.js';
import metricsRoutes from './routes/metrics/index.js';
import relayLinkRoutes from './routes/relays/index.js';
import routes from './routes/index.js';
import openapiPlugin, { openapiRoutes } from './plugins/app/openapi.js';

// ajv-formats is CommonJS with a default export.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

declare module 'fastify' {
  interface FastifyInstance {
    config: Config;
    vault: Vault;
  }
}

export type App = FastifyInstance;

export interface BuildOptions {
  /** pino options, or false for no logs (tests). Defaults to JSON logs at config.logLevel. */
  logger?: boolean | Record<string, unknown>;
  /** Where the default logger writes its lines (tests read what would be logged); stdout when absent. */
  logStream?: { write(line: string): void };
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;


/** Paths whose values must never reach a log line. */
const REDACT = [
  'req.headers.authorization', 'req.headers.cookie', 'headers.authorization',
  '*.password', '*.secret', '*.token', '*.key', '*.credentials', '*.refresh_token', '*.client_secret',
];

/** A URL with the bearer tokens of its path (share links, data-room invites) replaced. */
export function redactTokens(url: string): string {
  return url.replace(/(\/files\/shared\/|\/api\/v1\/rooms\/)[^/?]+/, '$1[redacted]');
}

/**
 * One access-log line per request, when it is answered, instead of Fastify's two ("incoming
 * request", then "request completed"): at info level the two cost a quarter of the throughput of
 * a cheap request (bench/api-throughput.mjs). The line carries the request, as the first did.
 */
class AccessLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored');
    else reply.log.info({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}

/** Validators: bodies are strict (no type coercion, unknown fields are errors); query strings and params are coerced. */
function validators() {
  const make = (coerce: boolean) =>
    addFormats(new Ajv({ coerceTypes: coerce ? 'array' : false, useDefaults: true, removeAdditional: false, allErrors: false, strict: false }));
  return { body: make(false), other: make(true) };
}

/**
 * Builds the control plane. `config.mongodbUri` must be set: the binary starts the embedded
 * database first when none was configured.
 */
export async function buildApp(config: Config, options: BuildOptions = {}): Promise<App> {
  if (!config.mongodbUri) throw new Error('buildApp needs config.mongodbUri');
  const logger = options.logger ?? {
    level: config.logLevel,
    ...(options.logStream ? { stream: options.logStream } : {}),
    redact: { paths: REDACT, censor: '[redacted]' },
    serializers: {
      // Share-link and data-room invite tokens are bearer secrets carried in the path.
      req: (req: { method: string; url: string; ip?: string }) => ({
        method: req.method,
        url: redactTokens(req.url),
        ip: req.ip,
      }),
    },
  };
  const app = Fastify({
    logger,
    bodyLimit: config.bodyLimitBytes,
    trustProxy: fastifyTrustProxy(config.trustProxy),
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    routerOptions: { ignoreTrailingSlash: true },
    logController: new AccessLog(),
    // Errors the router raises before any route runs, in the API's `{error}` shape. The URL is
    // not echoed: a share link's token is part of it.
    frameworkErrors: (error, request, reply) => {
      const status = error.statusCode === 414 ? 414 : 400;
      const message = error.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? 'A path segment of the URL is too long'
        : error.code === 'FST_ERR_BAD_URL' ? 'The URL is not valid (bad percent-encoding)' : 'Bad request';
      // Typed replies here know no status codes yet (the type provider is applied after).
      void (reply as FastifyReply).code(status).header('x-request-id', request.id).send({ error: message });
    },
    // Neither how long a request may take to arrive (a large upload may take hours) nor how long
    // its answer may take (a blocking POST /transfers/:id/execute waits for the whole transfer) is
    // bounded; a body that stops arriving is (config.bodyIdleTimeoutMs, below). Headers must still
    // arrive within Node's headersTimeout (60 s).
    requestTimeout: 0,
    connectionTimeout: 0,
  }).withTypeProvider<TypeBoxTypeProvider>();

  // JSON only (multipart is added by the file routes): anything else is 415, not a string body.
  app.removeContentTypeParser('text/plain');
  // An empty body is no body, whatever its Content-Type: `curl -X POST -H 'content-type:
  // application/json' …/execute` (or a client library that always sets the header) must reach
  // the route, which then answers as for a request without a body. The default parser (prototype
  // poisoning refused) reads every non-empty body.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    // parseAs 'string': the body is a string.
    if (body === '') done(null, undefined);
    else parseJson(request, body as string, done);
  });
  const ajv = validators();
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? ajv.body : ajv.other).compile(schema));

  const vault = vaultOf(config);
  app.decorate('config', config);
  app.decorate('vault', vault);

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id);
    // A client that stops sending a body it announced is cut off after bodyIdleTimeoutMs of
    // silence (Node's server destroys a socket whose 'timeout' nobody handles); once the body has
    // arrived, the answer may take as long as it needs (a scan verdict, a blocking execute).
    // (Injected requests have no real socket.)
    const { raw } = request;
    const length = raw.headers['content-length'];
    const hasBody = (length !== undefined && length !== '0') || raw.headers['transfer-encoding'] !== undefined;
    // Announced empty: no body to parse, so no Content-Type to refuse (415) either (see the JSON
    // parser above). Multipart routes keep theirs and say what an upload needs.
    if (!hasBody && raw.headers['content-type'] !== undefined && !request.routeOptions.schema?.consumes) delete raw.headers['content-type'];
    if (hasBody && typeof raw.socket?.setTimeout === 'function') {
      raw.socket.setTimeout(config.bodyIdleTimeoutMs);
      raw.once('end', () => raw.socket?.setTimeout(0));
    }
  });
  // Every body but a multipart one (streamed by its route) has been read before the handler.
  app.addHook('preHandler', async (request) => {
    const { raw } = request;
    if (!String(raw.headers['content-type'] ?? '').startsWith('multipart/') && typeof raw.socket?.setTimeout === 'function') raw.socket.setTimeout(0);
  });

  await app.register(errorHandler);
  await app.register(mongoosePlugin, { uri: config.mongodbUri, databaseName: config.databaseName, timeoutMs: config.dbTimeoutMs });
  await app.register(fastifyJwt, {
    // Its own key, not the master key: rotating the master key logs nobody out; shared by every
    // instance through the database unless set (docs/security.md "Key rotation").
    secret: config.sessionKey ?? await systemKeyOf(app.db, vault, 'session'),
    sign: { algorithm: 'HS256', expiresIn: config.sessionTtlSeconds },
    verify: { algorithms: ['HS256'] },
  });
  // Before every domain that reports to it, and before the routes its onResponse hook measures.
  await app.register(metricsPlugin);
  // Before access: its onRoute hook marks the docs' own pages public, which auth's checks.
  await app.register(openapiPlugin);
  await app.register(accessPlugin);
  await app.register(activityPlugin);
  await app.register(websocketPlugin);
  await app.register(multipartPlugin);
  await app.register(webhooksPlugin);
  await app.register(filesPlugin);
  await app.register(connectionsPlugin);
  await app.register(parametersPlugin);
  await app.register(transfersPlugin);
  await app.register(agentsPlugin);
  await app.register(relayPlugin);
  await app.register(plansPlugin);
  await app.register(notificationsPlugin);
  await app.register(workflowsPlugin);
  await app.register(schedulesPlugin);
  await app.register(watchersPlugin);
  await app.register(dataRoomsPlugin);
  await app.register(retentionPlugin);
  await app.register(instancesPlugin);
  await app.register(routes, { prefix: '/api/v1' });
  await app.register(openapiRoutes, { prefix: '/api/v1' });
  await app.register(metricsRoutes);
  await app.register(relayLinkRoutes);
  return app;
}

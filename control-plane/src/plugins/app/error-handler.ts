import fp from 'fastify-plugin';
import type { FastifyError } from 'fastify';
import { Messages } from '@xfer/shared';
import { MAX_TIME_EXPIRED } from '../../lib/pagination.js';
import { AppError } from '../../errors.js';

const DB_DOWN = new Set([
  'MongoServerSelectionError', 'MongooseServerSelectionError', 'MongoNetworkError', 'MongoNetworkTimeoutError',
  'MongoNotConnectedError', 'MongoTopologyClosedError', 'PoolClearedError', 'PoolClearedOnNetworkError',
  'MongoPoolClearedError',
]);

/** True for errors meaning "the database cannot be reached right now" rather than a bug. */
export function isDatabaseUnavailable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (DB_DOWN.has(e.name)) return true;
    if (e.name === 'MongooseError' && /(buffering timed out|Connection was force closed|client was closed)/i.test(e.message)) return true;
  }
  return false;
}

/** Turns an ajv validation error into a message that names the field. */
function validationMessage(err: FastifyError): string {
  const first = err.validation?.[0];
  if (!first) return err.message;
  const where = `${err.validationContext ?? 'request'}${first.instancePath.replace(/\//g, '.')}`;
  const params = first.params as Record<string, unknown>;
  switch (first.keyword) {
    case 'additionalProperties':
      return `${where} has unknown field '${String(params.additionalProperty)}'`;
    case 'required':
      return `${where}.${String(params.missingProperty)} is required`;
    case 'type':
      return `${where} must be ${String(params.type)}`;
    case 'minLength':
      return Number(params.limit) === 1 ? `${where} must not be empty` : `${where} ${first.message}`;
    case 'enum':
      return `${where} must be one of: ${(params.allowedValues as unknown[]).join(', ')}`;
    case 'pattern':
      return `${where} has an invalid format`;
    default:
      return `${where} ${first.message ?? 'is invalid'}`;
  }
}

/**
 * The one place errors become responses: `{error}` only, 5xx detail never leaves the server.
 */
export default fp(
  async (app) => {
    app.setErrorHandler((err: FastifyError, request, reply) => {
      if (err instanceof AppError) {
        if (err.statusCode >= 500) request.log.warn({ err }, 'dependency unavailable');
        return reply.code(err.statusCode).headers(err.headers).send({ error: err.message });
      }
      if (err.validation) return reply.code(400).send({ error: validationMessage(err) });
      if (err.name === 'MongoServerError' && (err as { code?: unknown }).code === MAX_TIME_EXPIRED) {
        request.log.warn({ err: { name: err.name, message: err.message } }, 'query stopped by its time limit');
        return reply.code(503).send({ error: Messages.queryTooSlow });
      }
      if (isDatabaseUnavailable(err)) {
        request.log.warn({ err: { name: err.name, message: err.message } }, 'database unavailable');
        return reply.code(503).header('retry-after', '5').send({ error: Messages.databaseUnavailable });
      }
      switch (err.code) {
        case 'FST_ERR_CTP_INVALID_JSON_BODY':
          return reply.code(400).send({ error: 'Request body is not valid JSON' });
        case 'FST_ERR_CTP_BODY_TOO_LARGE':
          return reply.code(413).send({ error: `Request body is larger than ${app.initialConfig.bodyLimit} bytes` });
        case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
          return reply.code(415).send({ error: `Unsupported Content-Type: ${request.headers['content-type'] ?? 'none'}` });
      }
      if (err instanceof SyntaxError && (err as FastifyError).statusCode === 400) {
        return reply.code(400).send({ error: 'Request body is not valid JSON' });
      }
      const status = err.statusCode ?? 500;
      if (status >= 400 && status < 500) return reply.code(status).send({ error: err.message });
      request.log.error({ err }, 'unhandled error');
      return reply.code(500).send({ error: `${Messages.internal} (request id ${request.id})` });
    });

    app.setNotFoundHandler((request, reply) => {
      reply.code(404).send({ error: `No route for ${request.method} ${request.url.split('?')[0]}` });
    });
  },
  { name: 'error-handler' },
);

import fp from 'fastify-plugin';
import fastifyMultipart from '@fastify/multipart';
import type { FastifyRequest } from 'fastify';
import { BadRequestError, UnsupportedMediaTypeError } from '../../errors.js';

/** Largest value of a text field of a multipart form (`path`). */
export const MULTIPART_FIELD_MAX_BYTES = 4096;

export const NOT_MULTIPART = 'Upload must be multipart/form-data with a "file" part';

/**
 * Route `onRequest` hook of upload routes: anything but `multipart/form-data` is refused with 415
 * before a byte of the body is read (a JSON body would otherwise be parsed only to be refused).
 */
export async function requireMultipart(request: FastifyRequest): Promise<void> {
  const type = request.headers['content-type'];
  if (!type || !/^multipart\/form-data\s*(;|$)/i.test(type)) throw new UnsupportedMediaTypeError(NOT_MULTIPART);
}

/**
 * Maps an error raised by the multipart parser (limits, malformed bodies) to a 400 naming the
 * problem; anything else (ours, or a bug) passes through unchanged.
 */
export function multipartProblem(err: unknown): unknown {
  const code = (err as { code?: string } | null)?.code;
  switch (code) {
    case 'FST_FILES_LIMIT':
      return new BadRequestError('Upload takes exactly one file part (named "file")');
    case 'FST_FIELDS_LIMIT':
    case 'FST_PARTS_LIMIT':
      return new BadRequestError('Upload takes only the parts "file" and "path"');
    case 'FST_PROTO_VIOLATION':
      return new BadRequestError('Upload has a part with a forbidden name');
    case 'FST_INVALID_JSON_FIELD_ERROR':
      return new BadRequestError('Upload field "path" must be plain text');
    case 'FST_MP_PREMATURE_CLOSE':
      return new BadRequestError('Upload ended before the multipart body was complete');
  }
  // busboy's own parse errors (no boundary, truncated body, bad headers) are plain Errors.
  if (err instanceof Error && !('statusCode' in err) && /multipart|boundary|terminated early|Malformed|Unexpected end/i.test(err.message)) {
    return new BadRequestError(`Malformed multipart body: ${err.message}`);
  }
  return err;
}

/**
 * @fastify/multipart in stream mode only: parts are read one by one with `request.parts()` and
 * the file part is consumed as a stream (never `toBuffer`, never attachFieldsToBody), so memory
 * does not grow with the upload. The limits here are the parser's backstops; the upload route
 * enforces `config.uploadMaxBytes` itself (so the answer is a clear 413, never a silently
 * truncated file), which is why `fileSize` sits one byte above it.
 */
export default fp(
  async (app) => {
    await app.register(fastifyMultipart, {
      // Keep the client's file name as sent ("a/b.txt" must be refused, not cut to "b.txt").
      preservePath: true,
      limits: {
        files: 1,
        fields: 1,
        parts: 2,
        fieldNameSize: 100,
        fieldSize: MULTIPART_FIELD_MAX_BYTES,
        headerPairs: 20,
        fileSize: Math.min(app.config.uploadMaxBytes + 1, Number.MAX_SAFE_INTEGER),
      },
    });
  },
  { name: 'multipart' },
);

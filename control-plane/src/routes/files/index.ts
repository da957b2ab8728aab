import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Deleted, Envelope, FileRecord, IdParams, ListFilesQuery, Page, SearchFilesQuery } from '@xfer/shared';
import { AppError, PayloadTooLargeError, UnprocessableEntityError } from '../../errors.js';
import { principalOf } from '../../plugins/app/access/index.js';
import { requireMultipart } from '../../plugins/external/multipart.js';
import { presentFile } from '../../plugins/app/files/files.service.js';
import { sendStoredFile } from './send-file.js';
import { ClientGoneError, receiveUpload } from './upload.js';

/**
 * The service's own files (api.md "Files"; decisions.md "Files and share links"; docs/api.md
 * "Files"). Every query is scoped to the caller's account and to live files: a deleted file, an
 * unknown id and another account's id are the same 404.
 */
const files: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();

  app.get('/files', {
    schema: { querystring: ListFilesQuery, response: { 200: Page(FileRecord) } },
    config: { access: { scope: 'files:read' } },
  }, async (request) => {
    return app.files.list(principalOf(request).accountId, request.query);
  });

  app.get('/files/search', {
    schema: { querystring: SearchFilesQuery, response: { 200: Page(FileRecord) } },
    config: { access: { scope: 'files:read' } },
  }, async (request) => {
    return app.files.search(principalOf(request).accountId, request.query);
  });

  app.get('/files/:id', {
    schema: { params: IdParams, response: { 200: Envelope(FileRecord) } },
    config: { access: { scope: 'files:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    return { data: presentFile(await app.files.get(accountId, request.params.id)) };
  });

  app.get('/files/:id/download', {
    schema: { params: IdParams },
    config: { access: { scope: 'files:read' } },
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    const file = await app.files.get(accountId, request.params.id);
    const id = String(file._id);
    return sendStoredFile(app, request, reply, file, {
      beforeSend: async (status) => {
        await app.outbox.emit(accountId, 'file.downloaded', { id, name: file.name, size: file.size, via: 'api' });
        await app.audit.recordRequest(request, {
          action: 'file.download', outcome: 'success', resource: { type: 'file', id },
          details: { name: file.name, size: file.size, via: 'api', ...(status === 206 ? { range: request.headers.range } : {}) },
        });
      },
    });
  });

  app.delete('/files/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: { access: { scope: 'files:write' } },
  }, async (request) => {
    const doc = await app.files.delete(principalOf(request), request.params.id);
    const id = String(doc._id);
    await app.audit.recordRequest(request, {
      action: 'file.delete', outcome: 'success', resource: { type: 'file', id }, details: { name: doc.name, path: doc.path, size: doc.size },
    });
    return { data: { id, deleted: true as const } };
  });

  /**
   * Streams the `file` part (upload.ts) through the size limit, hash and sniffer to the malware
   * scanner and the file store at once (`app.files.receive`); the content is committed and the
   * record written (`app.files.commit`) only when the scan is clean and the whole body was read.
   * Blocked → 422, scanner or store down → 503, both with nothing kept.
   */
  app.post('/files/upload', {
    onRequest: requireMultipart,
    // An answer given before the whole body arrived (413, 400, an early verdict) closes the
    // connection: the rest of the body is not read, so the socket cannot serve another request.
    onSend: async (request, reply) => {
      if (!request.raw.complete) void reply.header('connection', 'close');
    },
    // The parts are read as streams (upload.ts), so there is no body to validate; `consumes` tells the document.
    schema: { consumes: ['multipart/form-data'], response: { 201: Envelope(FileRecord) } },
    config: { access: { scope: 'files:write' } },
  }, async (request, reply) => {
    const principal = principalOf(request);
    const gone = new AbortController();
    const onClose = () => { if (!reply.raw.writableFinished) gone.abort(new ClientGoneError()); };
    reply.raw.once('close', onClose);
    let received: Awaited<ReturnType<typeof receiveUpload>>;
    try {
      received = await receiveUpload(app, request, gone.signal);
    } catch (err) {
      if (err instanceof AppError && (err.statusCode >= 500 || err instanceof PayloadTooLargeError || err instanceof ClientGoneError)) {
        await app.audit.recordRequest(request, { action: 'file.upload', outcome: 'failure', details: { reason: err.message } });
      }
      throw err;
    } finally {
      reply.raw.off('close', onClose);
    }

    if ('blocked' in received) {
      const { name, folder: path, size, sha256, signature } = received;
      await app.files.reportBlocked(principal.accountId, received);
      await app.audit.recordRequest(request, {
        action: 'file.upload', outcome: 'denied', details: { name, path, size, sha256, signature },
      });
      throw new UnprocessableEntityError(`File rejected: malware detected (${signature})`);
    }

    const file = await app.files.commit(principal, received, request.log);
    const { name, folder, size, sha256, mimeType } = received;
    await app.audit.recordRequest(request, {
      action: 'file.upload', outcome: 'success', resource: { type: 'file', id: file.id },
      details: { name, path: folder, size, sha256, mime_type: mimeType },
    });
    return reply.code(201).send({ data: file });
  });
};

export default files;

import type { FastifyPluginAsync } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Deleted, Envelope, FileRecord, IdParams, ListFilesQuery, Page, SearchFilesQuery } from '@xfer/shared';
import { AppError, PayloadTooLargeError, UnprocessableEntityError } from '../../errors.js';
import { paginate, toObjectId } from '../../lib/pagination.js';
import { principalOf } from '../../plugins/app/auth.js';
import { requireMultipart } from '../../plugins/external/multipart.js';
import {
  fileNotFound, findLiveFile, folderFilter, liveFiles, normalizeFolder, presentFile, searchFilter, type StoredFile,
} from '../../plugins/app/files/files.service.js';
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
    const { accountId } = principalOf(request);
    const { path, recursive, ...page } = request.query;
    const folder = normalizeFolder('querystring.path', path ?? '/');
    return paginate(app.db.files, folderFilter(accountId, folder, recursive ?? false), page, presentFile);
  });

  app.get('/files/search', {
    schema: { querystring: SearchFilesQuery, response: { 200: Page(FileRecord) } },
    config: { access: { scope: 'files:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    const { limit, cursor, ...filters } = request.query;
    return paginate(app.db.files, searchFilter(accountId, filters), { limit, cursor }, presentFile);
  });

  app.get('/files/:id', {
    schema: { params: IdParams, response: { 200: Envelope(FileRecord) } },
    config: { access: { scope: 'files:read' } },
  }, async (request) => {
    const { accountId } = principalOf(request);
    return { data: presentFile(await findLiveFile(app.db, accountId, request.params.id)) };
  });

  app.get('/files/:id/download', {
    schema: { params: IdParams },
    config: { access: { scope: 'files:read' } },
  }, async (request, reply) => {
    const { accountId } = principalOf(request);
    const file = await findLiveFile(app.db, accountId, request.params.id);
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
    const principal = principalOf(request);
    const _id = toObjectId(request.params.id);
    const doc = _id && await app.db.files.findOneAndUpdate(
      { _id, ...liveFiles(principal.accountId) },
      { $set: { deleted_at: new Date(), deleted_by: principal.actor } },
      { new: true },
    ).lean<StoredFile>();
    if (!doc) throw fileNotFound(request.params.id);
    const id = String(doc._id);
    await app.outbox.emit(principal.accountId, 'file.deleted', { id, name: doc.name, path: doc.path, size: doc.size, sha256: doc.sha256 });
    await app.audit.recordRequest(request, {
      action: 'file.delete', outcome: 'success', resource: { type: 'file', id }, details: { name: doc.name, path: doc.path, size: doc.size },
    });
    return { data: { id, deleted: true as const } };
  });

  /**
   * Streams the `file` part through the size limit, hash and sniffer to the malware scanner and
   * the file store at once; the content is committed and the record written only when the scan
   * is clean and the whole body was read. Blocked → 422, scanner or store down → 503, both with
   * nothing kept.
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
      await app.outbox.emit(principal.accountId, 'file.scan_blocked', { name, path, size, sha256, signature });
      await app.audit.recordRequest(request, {
        action: 'file.upload', outcome: 'denied', details: { name, path, size, sha256, signature },
      });
      throw new UnprocessableEntityError(`File rejected: malware detected (${signature})`);
    }

    const { pending, name, folder, size, sha256, mimeType } = received;
    let storageKey: string;
    try {
      storageKey = await pending.commit();
    } catch (err) {
      await pending.discard().catch(() => {});
      throw err;
    }
    let doc: StoredFile;
    try {
      doc = (await app.db.files.create({
        account_id: principal.accountId, name, name_lower: name.toLowerCase(), path: folder, size, mime_type: mimeType, sha256,
        storage_key: storageKey, uploaded_by: principal.actor,
      })).toObject() as StoredFile;
    } catch (err) {
      await app.fileStore.remove(storageKey).catch((e: unknown) => request.log.warn({ err: e }, 'could not remove the content of an unrecorded upload'));
      throw err;
    }
    const file = presentFile(doc);
    await app.outbox.emit(principal.accountId, 'file.uploaded', file);
    await app.audit.recordRequest(request, {
      action: 'file.upload', outcome: 'success', resource: { type: 'file', id: file.id },
      details: { name, path: folder, size, sha256, mime_type: mimeType },
    });
    return reply.code(201).send({ data: file });
  });
};

export default files;

import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Envelope, RoomTokenFileParams, RoomTokenParams, RoomFile, RoomView, RoomViewQuery, type Actor, type DataRoomFile } from '@xfer/shared';
import { AppError, ForbiddenError } from '../../errors.js';
import type { AuditContext } from '../../plugins/app/access/index.js';
import { inviteUrl, type StoredMember, type StoredRoom } from '../../plugins/app/data-rooms/index.js';
import { requireMultipart } from '../../plugins/external/multipart.js';
import { sendStoredFile } from '../files/send-file.js';
import { closeIfUnread, uploadIntoRoom } from '../data-rooms/room-upload.js';
import { renderErrorPage, renderRoomPage, sendPage, wantsHtml } from './room-page.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The member and room of the invite token in the URL (routes/rooms). */
    roomAccess: { member: StoredMember; room: StoredRoom } | null;
  }
}

/** What a member is shown of a file: nothing of the account's folders or people. */
const memberFile = (f: DataRoomFile): RoomFile => ({ id: f.id, name: f.name, size: f.size, mime_type: f.mime_type, sha256: f.sha256, added_at: f.added_at });

/**
 * The invite token routes (scope-areas.md "Data rooms"; docs/api.md "Data rooms"): no account,
 * the token in the URL is the credential, as a share link's (routes/shares): looked up by its
 * hash, 404 when unknown, 410 once revoked or expired or its room is, limited per client address
 * (a budget of its own, XFER_SHARE_RATE_LIMIT_PER_MINUTE), never logged (app.ts redacts it).
 * Every view, download and upload is audited with the member as actor. A browser (Accept:
 * text/html) gets pages (room-page.ts), everything else JSON.
 */
const rooms: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.decorateRequest('roomAccess', null);

  const publicAccess = { access: { public: true, unlimited: true } } as const;
  const limit = async (request: FastifyRequest, reply: FastifyReply) => {
    await app.rateLimiter.consume(`room:${request.ip}`, reply, app.config.shareRateLimitPerMinute);
  };
  const openInvite = async (request: FastifyRequest) => {
    request.roomAccess = await app.dataRoomMembers.open((request.params as { token: string }).token);
  };
  const memberActor = (member: StoredMember): Actor => ({ type: 'room_member', id: String(member._id) });
  const auditBy = (request: FastifyRequest, member: StoredMember): AuditContext => ({ accountId: member.account_id, actor: memberActor(member), ip: request.ip });

  // A browser gets its client errors (an invite that is gone, a blocked upload, the rate limit) as
  // pages, from any step of any route here; everything else goes on to the app's error handler.
  app.setErrorHandler(async (err, request, reply) => {
    if (!(err instanceof AppError && err.statusCode < 500 && wantsHtml(request))) throw err;
    const back = request.method === 'POST' ? inviteUrl((request.params as { token: string }).token) : undefined;
    return sendPage(reply.headers(err.headers), err.statusCode, renderErrorPage(err.message, back));
  });

  app.get('/rooms/:token', {
    schema: { params: RoomTokenParams, querystring: RoomViewQuery, response: { 200: Envelope(RoomView) } },
    config: publicAccess,
    onRequest: limit,
  }, async (request, reply) => {
    reply.header('referrer-policy', 'no-referrer');
    const { member, room } = await app.dataRoomMembers.open(request.params.token);
    const { notice, ...page } = request.query;
    const files = await app.dataRooms.files(room, page);
    await app.audit.recordRequest(auditBy(request, member), {
      action: 'data_room.view', outcome: 'success', resource: { type: 'data_room', id: String(room._id) }, details: { files: files.data.length },
    });
    const view: RoomView = {
      room: { id: String(room._id), name: room.name, description: room.description ?? null, expires_at: room.expires_at?.toISOString() ?? null },
      member: { id: String(member._id), email: member.email, role: member.role as RoomView['member']['role'], expires_at: member.expires_at?.toISOString() ?? null },
      files: files.data.map(memberFile),
      next_cursor: files.next_cursor,
    };
    if (wantsHtml(request)) {
      return sendPage(reply, 200, renderRoomPage(view, inviteUrl(request.params.token), notice === 'uploaded' ? 'Your file was uploaded and scanned.' : undefined));
    }
    return { data: view };
  });

  app.get('/rooms/:token/files/:file_id/download', {
    schema: { params: RoomTokenFileParams },
    config: publicAccess,
    onRequest: limit,
  }, async (request, reply) => {
    const { member, room } = await app.dataRoomMembers.open(request.params.token);
    const file = await app.dataRooms.fileOf(room, request.params.file_id);
    reply.header('referrer-policy', 'no-referrer');
    const fileId = String(file._id);
    const seen = { name: file.name, size: file.size, via: 'data_room', data_room_id: String(room._id), member_id: String(member._id) };
    return sendStoredFile(app, request, reply, file, {
      beforeSend: async (status) => {
        await app.audit.recordRequest(auditBy(request, member), {
          action: 'file.download', outcome: 'success', resource: { type: 'file', id: fileId },
          details: { ...seen, ...(status === 206 ? { range: request.headers.range } : {}) },
        });
        await app.outbox.emit(room.account_id, 'file.downloaded', { id: fileId, ...seen });
      },
    });
  });

  app.post('/rooms/:token/upload', {
    // The invite is checked before the body is read: a gone or viewer's invite reads no upload.
    onRequest: [limit, openInvite, requireMultipart],
    onSend: closeIfUnread,
    schema: { params: RoomTokenParams, consumes: ['multipart/form-data'], response: { 201: Envelope(RoomFile) } },
    config: publicAccess,
  }, async (request, reply) => {
    const { member, room } = request.roomAccess!;
    if (member.role !== 'contributor') {
      await app.audit.recordRequest(auditBy(request, member), {
        action: 'file.upload', outcome: 'denied', resource: { type: 'data_room', id: String(room._id) }, details: { reason: 'viewer invite' },
      });
      throw new ForbiddenError('This invite lets you view and download the room, not upload into it');
    }
    const file = await uploadIntoRoom(app, request, reply, room, { actor: memberActor(member), audit: auditBy(request, member) });
    // A browser's form post is answered by the room page (post, redirect, get).
    if (wantsHtml(request)) return (reply as FastifyReply).code(303).header('location', `${inviteUrl(request.params.token)}?notice=uploaded`).send();
    return reply.code(201).send({ data: memberFile(file) });
  });
};

export default rooms;

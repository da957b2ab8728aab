import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  AddDataRoomFileRequest, AddDataRoomMemberRequest, CreateDataRoomRequest, CreatedDataRoomMember, DataRoom, DataRoomFile,
  DataRoomFileParams, DataRoomMember, DataRoomMemberParams, Deleted, Envelope, IdParams, ListDataRoomsQuery, Page, PageQuery,
  UpdateDataRoomRequest, type Scope,
} from '@xfer/shared';
import { ForbiddenError } from '../../errors.js';
import { principalOf, requireExpiryWithin, type Principal } from '../../plugins/app/access/index.js';
import { requireMultipart } from '../../plugins/external/multipart.js';
import {
  futureDate, inviteUrl, type MemberSubject, type RoomFileSubject, type RoomSubject, type StoredRoom,
} from '../../plugins/app/data-rooms/index.js';
import { closeIfUnread, uploadIntoRoom } from './room-upload.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The caller's room named by `:id`, loaded before the body is read (routes/data-rooms). */
    dataRoom: StoredRoom | null;
  }
}

const read = { access: { scope: 'data-rooms:read' } } as const;
const write = { access: { scope: 'data-rooms:write' } } as const;
const roomResource = (id: string) => ({ type: 'data_room', id });
const roomDetails = ({ name, changed }: RoomSubject) => ({ name, ...(changed ? { changed } : {}) });
const fileDetails = ({ room_id, name, size }: RoomFileSubject) => ({ data_room_id: room_id, name, size });
const memberDetails = ({ member_id, email, role, expires_at }: MemberSubject) => ({ member_id, email, role, expires_at });

const callerName = (p: Principal) => (p.kind === 'api_key' ? 'the calling key' : `your role (${p.role})`);

/**
 * Data rooms (scope-areas.md "Data rooms"; docs/api.md "Data rooms"). A room opens files of the
 * store to outside parties: what goes in, and who is let in, is checked against what the caller
 * itself may do with files (docs/security.md "Escalation rules"). Routes on one room load it in
 * `onRequest`, so another account's room is 404 whatever the body.
 */
const dataRooms: FastifyPluginAsync = async (fastify) => {
  const app = fastify.withTypeProvider<TypeBoxTypeProvider>();
  app.decorateRequest('dataRoom', null);

  async function loadRoom(request: FastifyRequest): Promise<void> {
    request.dataRoom = await app.dataRooms.get(principalOf(request).accountId, (request.params as { id: string }).id);
  }
  const roomOf = (request: FastifyRequest): StoredRoom => request.dataRoom!;

  /** 403 (audited as a denied escalation) unless the caller holds every scope of `needs`. */
  async function requireScopes(request: FastifyRequest, needs: Scope[], why: string, action: string): Promise<void> {
    const principal = principalOf(request);
    const missing = needs.filter((s) => !principal.scopes.has(s));
    if (missing.length === 0) return;
    await app.audit.recordRequest(request, { action, outcome: 'denied', resource: roomResource(String(roomOf(request)._id)), details: { reason: 'scope escalation' } });
    throw new ForbiddenError(`${why}: this needs ${needs.join(' and ')}, which ${callerName(principal)} does not hold (missing ${missing.join(', ')})`);
  }

  app.get('/data-rooms', {
    schema: { querystring: ListDataRoomsQuery, response: { 200: Page(DataRoom) } },
    config: read,
  }, async (request) => app.dataRooms.list(principalOf(request).accountId, request.query));

  app.post('/data-rooms', {
    schema: { body: CreateDataRoomRequest, response: { 201: Envelope(DataRoom) } },
    config: write,
  }, async (request, reply) => {
    const principal = principalOf(request);
    const room = await app.audit.change(request, (announce) => app.dataRooms.create(principal.accountId, principal.actor, request.body, (subject) => announce({
      action: 'data_room.create', outcome: 'success', resource: roomResource(subject.id), details: roomDetails(subject),
    })));
    await app.outbox.emit(principal.accountId, 'data_room.created', { id: room.id, name: room.name, expires_at: room.expires_at, created_by: room.created_by });
    return reply.code(201).send({ data: room });
  });

  app.get('/data-rooms/:id', {
    schema: { params: IdParams, response: { 200: Envelope(DataRoom) } },
    config: read,
    onRequest: loadRoom,
  }, async (request) => ({ data: app.dataRooms.present(roomOf(request)) }));

  app.put('/data-rooms/:id', {
    schema: { params: IdParams, body: UpdateDataRoomRequest, response: { 200: Envelope(DataRoom) } },
    config: write,
    onRequest: loadRoom,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const room = await app.audit.change(request, (announce) => app.dataRooms.update(accountId, request.params.id, request.body, (subject) => announce({
      action: 'data_room.update', outcome: 'success', resource: roomResource(subject.id), details: roomDetails(subject),
    })));
    return { data: room };
  });

  app.delete('/data-rooms/:id', {
    schema: { params: IdParams, response: { 200: Envelope(Deleted) } },
    config: write,
    onRequest: loadRoom,
  }, async (request) => {
    const { accountId } = principalOf(request);
    const room = await app.audit.change(request, (announce) => app.dataRooms.remove(accountId, request.params.id, (subject) => announce({
      action: 'data_room.delete', outcome: 'success', resource: roomResource(subject.id), details: roomDetails(subject),
    })));
    return { data: { id: String(room._id), deleted: true as const } };
  });

  app.get('/data-rooms/:id/files', {
    schema: { params: IdParams, querystring: PageQuery, response: { 200: Page(DataRoomFile) } },
    config: read,
    onRequest: loadRoom,
  }, async (request) => app.dataRooms.files(roomOf(request), request.query));

  app.post('/data-rooms/:id/files', {
    schema: { params: IdParams, body: AddDataRoomFileRequest, response: { 201: Envelope(DataRoomFile) } },
    config: write,
    onRequest: loadRoom,
  }, async (request, reply) => {
    const principal = principalOf(request);
    // The room's members may download what is in it: putting a file there passes on a read of it.
    await requireScopes(request, ['files:read'], "A file in a data room can be downloaded by the room's members", 'data_room.file_add');
    const room = roomOf(request);
    const file = await app.audit.change(request, (announce) => app.dataRooms.addFile(room, request.body.file_id, principal.actor, (subject) => announce({
      action: 'data_room.file_add', outcome: 'success', resource: { type: 'file', id: subject.file_id }, details: fileDetails(subject),
    })));
    await app.outbox.emit(principal.accountId, 'data_room.file_added', {
      room_id: String(room._id), file_id: file.id, name: file.name, size: file.size, sha256: file.sha256, added_by: principal.actor,
    });
    return reply.code(201).send({ data: file });
  });

  app.post('/data-rooms/:id/upload', {
    onRequest: [loadRoom, requireMultipart],
    onSend: closeIfUnread,
    schema: { params: IdParams, consumes: ['multipart/form-data'], response: { 201: Envelope(DataRoomFile) } },
    config: write,
  }, async (request, reply) => {
    const principal = principalOf(request);
    await requireScopes(request, ['files:write', 'files:read'], "An upload into a data room is a file of the store the room's members can download", 'file.upload');
    const file = await uploadIntoRoom(app, request, reply, roomOf(request), { actor: principal.actor, audit: request });
    return reply.code(201).send({ data: file });
  });

  app.delete('/data-rooms/:id/files/:file_id', {
    schema: { params: DataRoomFileParams, response: { 200: Envelope(Deleted) } },
    config: write,
    onRequest: loadRoom,
  }, async (request) => {
    await app.audit.change(request, (announce) => app.dataRooms.removeFile(roomOf(request), request.params.file_id, (subject) => announce({
      action: 'data_room.file_remove', outcome: 'success', resource: { type: 'file', id: subject.file_id }, details: fileDetails(subject),
    })));
    return { data: { id: request.params.file_id, deleted: true as const } };
  });

  app.get('/data-rooms/:id/members', {
    schema: { params: IdParams, querystring: PageQuery, response: { 200: Page(DataRoomMember) } },
    config: read,
    onRequest: loadRoom,
  }, async (request) => app.dataRoomMembers.list(roomOf(request), request.query));

  app.post('/data-rooms/:id/members', {
    schema: { params: IdParams, body: AddDataRoomMemberRequest, response: { 201: Envelope(CreatedDataRoomMember) } },
    config: write,
    onRequest: loadRoom,
  }, async (request, reply) => {
    const principal = principalOf(request);
    const { role, expires_at } = request.body;
    // An invite is a credential: a viewer downloads the room's files, a contributor also writes
    // into the store. The caller must hold what it hands out, and no longer than it holds it.
    const needs: Scope[] = role === 'contributor' ? ['files:read', 'files:write'] : ['files:read'];
    await requireScopes(request, needs, `A ${role} of a data room ${role === 'contributor' ? 'downloads and uploads files' : 'downloads files'}`, 'data_room.member_add');
    try {
      requireExpiryWithin(await app.apiKeys.callerExpiresAt(principal), futureDate('expires_at', expires_at), 'data room invite');
    } catch (err) {
      if (err instanceof ForbiddenError) {
        await app.audit.recordRequest(request, {
          action: 'data_room.member_add', outcome: 'denied', resource: roomResource(request.params.id), details: { reason: 'expiry beyond the calling key' },
        });
      }
      throw err;
    }
    const room = roomOf(request);
    const { member, token } = await app.audit.change(request, (announce) => app.dataRoomMembers.add(room, request.body, principal.actor, (subject) => announce({
      action: 'data_room.member_add', outcome: 'success', resource: roomResource(subject.room_id), details: memberDetails(subject),
    })));
    await app.outbox.emit(principal.accountId, 'data_room.member_added', {
      room_id: member.room_id, member_id: member.id, email: member.email, role: member.role, expires_at: member.expires_at,
    });
    return reply.code(201).send({ data: { ...member, token, invite_url: inviteUrl(token) } });
  });

  app.delete('/data-rooms/:id/members/:member_id', {
    schema: { params: DataRoomMemberParams, response: { 200: Envelope(Deleted) } },
    config: write,
    onRequest: loadRoom,
  }, async (request) => {
    const principal = principalOf(request);
    const member = await app.audit.change(request, (announce) => app.dataRoomMembers.revoke(roomOf(request), request.params.member_id, principal.actor, (subject) => announce({
      action: 'data_room.member_revoke', outcome: 'success', resource: roomResource(subject.room_id), details: memberDetails(subject),
    })));
    return { data: { id: String(member._id), deleted: true as const } };
  });
};

export default dataRooms;

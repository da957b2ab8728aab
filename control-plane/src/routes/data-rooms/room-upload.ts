import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Actor, DataRoomFile } from '@xfer/shared';
import { AppError, PayloadTooLargeError, UnprocessableEntityError } from '../../errors.js';
import type { AuditBy } from '../../plugins/app/access/index.js';
import { roomFolder, type StoredRoom } from '../../plugins/app/data-rooms/index.js';
import { ClientGoneError, receiveUpload } from '../files/upload.js';

/** Who uploads into a room: the account's caller, or an invited contributor. */
export interface RoomUploader {
  /** Who the file record, the room entry and the events name. */
  actor: Actor;
  /** Who the audit records name (the request's caller, or the member with the request's address). */
  audit: AuditBy;
}

/**
 * An upload into a data room (`POST /data-rooms/:id/upload` and `POST /rooms/:token/upload`),
 * through the file store's own intake (routes/files/upload.ts: streamed to the scanner and the
 * store at once, never buffered). It lands in the account's store under the room's folder and
 * is put in the room; `file.uploaded` and `data_room.file_added` are emitted. Blocked by the
 * scan → 422 with `file.scan_blocked`, a `denied` audit record and nothing kept. The room's quota
 * bounds it (413, nothing kept): a full room reads no body, the stream stops at the byte past what
 * is left, and the total is checked again before the file is kept, so uploads racing each other
 * overshoot it by at most what the others committed between that check and their own commit.
 */
export async function uploadIntoRoom(
  app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, room: StoredRoom, by: RoomUploader,
): Promise<DataRoomFile> {
  const accountId = String(room.account_id);
  const roomId = String(room._id);
  const gone = new AbortController();
  const onClose = () => { if (!reply.raw.writableFinished) gone.abort(new ClientGoneError()); };
  reply.raw.once('close', onClose);
  let received: Awaited<ReturnType<typeof receiveUpload>>;
  try {
    const { quota, used, remaining } = await app.dataRooms.uploadAllowance(room);
    if (remaining === 0) throw roomFull(quota, used);
    const limit = { maxBytes: remaining, message: `File exceeds what is left of the data room's quota: ${remaining} of ${quota} bytes (quota_bytes)` };
    received = await receiveUpload(app, request, gone.signal, { folder: roomFolder(room._id), limit });
  } catch (err) {
    if (err instanceof AppError && (err.statusCode >= 500 || err instanceof PayloadTooLargeError || err instanceof ClientGoneError)) {
      await app.audit.recordRequest(by.audit, { action: 'file.upload', outcome: 'failure', details: { reason: err.message, data_room_id: roomId } });
    }
    throw err;
  } finally {
    reply.raw.off('close', onClose);
  }

  if ('blocked' in received) {
    const { name, folder: path, size, sha256, signature } = received;
    await app.files.reportBlocked(accountId, received);
    await app.audit.recordRequest(by.audit, {
      action: 'file.upload', outcome: 'denied', resource: { type: 'data_room', id: roomId }, details: { name, path, size, sha256, signature },
    });
    throw new UnprocessableEntityError(`File rejected: malware detected (${signature})`);
  }

  // Uploads that ran beside this one may have filled the room meanwhile.
  const now = await app.dataRooms.uploadAllowance(room);
  if (received.size > now.remaining) {
    await app.files.discard({ pending: received.pending });
    const err = roomFull(now.quota, now.used);
    await app.audit.recordRequest(by.audit, { action: 'file.upload', outcome: 'failure', details: { reason: err.message, data_room_id: roomId } });
    throw err;
  }
  const record = await app.files.commit({ accountId, actor: by.actor }, received, request.log);
  const { name, folder, size, sha256, mimeType } = received;
  await app.audit.recordRequest(by.audit, {
    action: 'file.upload', outcome: 'success', resource: { type: 'file', id: record.id },
    details: { name, path: folder, size, sha256, mime_type: mimeType, data_room_id: roomId },
  });
  const entry = await app.dataRooms.link(room, record, by.actor);
  await app.outbox.emit(accountId, 'data_room.file_added', { room_id: roomId, file_id: record.id, name, size, sha256, added_by: by.actor });
  return entry;
}

/** 413 for an upload into a room whose quota is spent. */
function roomFull(quota: number, used: number): PayloadTooLargeError {
  return new PayloadTooLargeError(`The data room's quota is used up: ${used} of ${quota} bytes (quota_bytes); nothing was kept`);
}

/** Headers of an upload route: an answer given before the whole body arrived closes the connection (as POST /files/upload). */
export async function closeIfUnread(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  if (!request.raw.complete) void reply.header('connection', 'close');
}

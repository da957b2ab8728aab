import { Types } from 'mongoose';
import type {
  Actor, CreateDataRoomRequest, DataRoom, DataRoomFile, FileRecord, ListDataRoomsQuery, Page, PageQuery, UpdateDataRoomRequest,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { DataRoomDoc } from '../../../models/data-room.model.js';
import type { DataRoomFileDoc } from '../../../models/data-room-file.model.js';
import { BadRequestError, ConflictError, NotFoundError } from '../../../errors.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import { isDuplicateKey } from '../../../lib/duplicate-key.js';
import { liveFiles, presentFile, type FilesService, type StoredFile } from '../files/files.service.js';

export type StoredRoom = DataRoomDoc & { _id: Types.ObjectId };
type StoredRoomFile = DataRoomFileDoc & { _id: Types.ObjectId };
type AccountId = string | Types.ObjectId;

/** The one read shape of a room: no account. `defaultQuota` is config.dataRoomQuotaBytes. */
export function presentRoom(doc: StoredRoom, defaultQuota: number, now = new Date()): DataRoom {
  return {
    id: String(doc._id),
    name: doc.name,
    description: doc.description ?? null,
    expires_at: doc.expires_at ? doc.expires_at.toISOString() : null,
    status: roomExpired(doc, now) ? 'expired' : 'active',
    quota_bytes: doc.quota_bytes ?? defaultQuota,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
    created_by: { type: doc.created_by.type as Actor['type'], id: doc.created_by.id ?? null },
  };
}

export function roomExpired(doc: Pick<StoredRoom, 'expires_at'>, now = new Date()): boolean {
  return !!doc.expires_at && doc.expires_at <= now;
}

/** The folder of the account's store that uploads into a room go to. */
export function roomFolder(roomId: Types.ObjectId | string): string {
  return `/data-rooms/${String(roomId)}`;
}

/** An `expires_at` as given (`field` names it): a date in the future, or null. */
export function futureDate(field: string, value: string | null | undefined): Date | null {
  if (value == null) return null;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) throw new BadRequestError(`${field} must be a date-time`);
  if (date.getTime() <= Date.now()) throw new BadRequestError(`${field} must be in the future`);
  return date;
}

/** What an audit record of a room change names. */
export interface RoomSubject { id: string; name: string; changed?: string[] }
export type BeforeRoomWrite = (subject: RoomSubject) => Promise<void>;
/** What an audit record of a file put in or taken out of a room names. */
export interface RoomFileSubject { room_id: string; file_id: string; name: string; size: number }
export type BeforeRoomFileWrite = (subject: RoomFileSubject) => Promise<void>;
const nothing = async () => {};

const roomNotFound = (id: string) => new NotFoundError(`Data room ${id} not found`);
const roomFileNotFound = (id: string) => new NotFoundError(`File ${id} is not in this data room`);

/**
 * Data rooms and their files (`app.dataRooms`; docs/api.md "Data rooms"). Every query is scoped
 * to the account and to rooms not deleted: unknown, malformed, deleted and other accounts' ids
 * are the same 404. A room's files are the store's own (`app.files`): only live files show.
 */
export class DataRoomsService {
  constructor(private readonly o: { db: Models; files: FilesService; defaultQuotaBytes: number }) {}

  /** The room's read shape. */
  present(doc: StoredRoom, now = new Date()): DataRoom {
    return presentRoom(doc, this.o.defaultQuotaBytes, now);
  }

  list(accountId: AccountId, query: ListDataRoomsQuery): Promise<Page<DataRoom>> {
    const now = new Date();
    return paginate(this.o.db.dataRooms, { account_id: new Types.ObjectId(String(accountId)), deleted_at: null }, query,
      (doc) => this.present(doc as StoredRoom, now));
  }

  /**
   * What an upload into the room may still add: its quota less the live files uploaded into it
   * (the store's files in the room's folder; files put in from elsewhere take no new space). One
   * aggregate over the room's folder.
   */
  async uploadAllowance(room: StoredRoom): Promise<{ quota: number; used: number; remaining: number }> {
    const [sum] = await this.o.db.files.aggregate<{ used: number }>([
      { $match: { ...liveFiles(room.account_id), path: roomFolder(room._id) } },
      { $group: { _id: null, used: { $sum: '$size' } } },
    ]);
    const quota = room.quota_bytes ?? this.o.defaultQuotaBytes;
    const used = sum?.used ?? 0;
    return { quota, used, remaining: Math.max(0, quota - used) };
  }

  /** The caller's room (expired or not), or 404. */
  async get(accountId: AccountId, id: string): Promise<StoredRoom> {
    const _id = toObjectId(id);
    const doc = _id && await this.o.db.dataRooms.findOne({ _id, account_id: new Types.ObjectId(String(accountId)), deleted_at: null }).lean();
    if (!doc) throw roomNotFound(id);
    return doc as StoredRoom;
  }

  async create(accountId: AccountId, by: Actor, input: CreateDataRoomRequest, beforeWrite: BeforeRoomWrite = nothing): Promise<DataRoom> {
    const expiresAt = futureDate('expires_at', input.expires_at);
    const _id = new Types.ObjectId();
    await beforeWrite({ id: String(_id), name: input.name });
    const doc = await this.o.db.dataRooms.create({
      _id, account_id: accountId, name: input.name, description: input.description ?? null, expires_at: expiresAt,
      quota_bytes: input.quota_bytes ?? this.o.defaultQuotaBytes, created_by: by,
    });
    return this.present(doc.toObject() as StoredRoom);
  }

  /** Changes the given fields; `expires_at: null` makes the room last, a new date reopens an expired one. */
  async update(accountId: AccountId, id: string, input: UpdateDataRoomRequest, beforeWrite: BeforeRoomWrite = nothing): Promise<DataRoom> {
    const changed = Object.keys(input).sort();
    if (changed.length === 0) throw new BadRequestError('body must contain at least one of name, description, expires_at, quota_bytes');
    const doc = await this.get(accountId, id);
    const set: Record<string, unknown> = { updated_at: new Date() };
    if (input.name !== undefined) set.name = input.name;
    if (input.description !== undefined) set.description = input.description;
    if (input.expires_at !== undefined) set.expires_at = futureDate('expires_at', input.expires_at);
    // A lower quota than what the room holds is allowed: it stops further uploads, removes nothing.
    if (input.quota_bytes !== undefined) set.quota_bytes = input.quota_bytes;
    await beforeWrite({ id: String(doc._id), name: input.name ?? doc.name, changed });
    const updated = await this.o.db.dataRooms.findOneAndUpdate({ _id: doc._id, account_id: doc.account_id, deleted_at: null }, { $set: set }, { new: true }).lean();
    if (!updated) throw roomNotFound(id);
    return this.present(updated as StoredRoom);
  }

  /** Marks the room deleted: its members' invites answer 410 from now on. The files stay in the store. */
  async remove(accountId: AccountId, id: string, beforeWrite: BeforeRoomWrite = nothing): Promise<StoredRoom> {
    const doc = await this.get(accountId, id);
    await beforeWrite({ id: String(doc._id), name: doc.name });
    const removed = await this.o.db.dataRooms.findOneAndUpdate(
      { _id: doc._id, account_id: doc.account_id, deleted_at: null }, { $set: { deleted_at: new Date() } }, { new: true },
    ).lean();
    if (!removed) throw roomNotFound(id);
    return removed as StoredRoom;
  }

  /**
   * A page of the room's files, newest first. The page is cut from the room's entries, so an
   * entry whose file was deleted from the store since makes a page shorter (never a wrong one).
   */
  async files(room: StoredRoom, query: PageQuery): Promise<Page<DataRoomFile>> {
    const page = await paginate(this.o.db.dataRoomFiles, { room_id: room._id }, query, (doc) => doc as StoredRoomFile);
    const live = await this.o.db.files.find({ _id: { $in: page.data.map((e) => e.file_id) }, ...liveFiles(room.account_id) }).lean<StoredFile[]>();
    const byId = new Map(live.map((f) => [String(f._id), f]));
    const data: DataRoomFile[] = [];
    for (const entry of page.data) {
      const file = byId.get(String(entry.file_id));
      if (file) data.push({ ...presentFile(file), added_at: entry.added_at.toISOString(), added_by: { type: entry.added_by.type as Actor['type'], id: entry.added_by.id ?? null } });
    }
    return { data, next_cursor: page.next_cursor };
  }

  /** A live store file that is in `room`, or 404 (unknown, deleted, not in the room alike). */
  async fileOf(room: StoredRoom, fileId: string): Promise<StoredFile> {
    const _id = toObjectId(fileId);
    const entry = _id && await this.o.db.dataRoomFiles.exists({ room_id: room._id, file_id: _id });
    const file = entry && await this.o.db.files.findOne({ _id, ...liveFiles(room.account_id) }).lean<StoredFile>();
    if (!file) throw roomFileNotFound(fileId);
    return file;
  }

  /** Puts the account's live file `fileId` in the room (404 as FilesService.get); 409 when it is there already. */
  async addFile(room: StoredRoom, fileId: string, by: Actor, beforeWrite: BeforeRoomFileWrite = nothing): Promise<DataRoomFile> {
    let file: StoredFile;
    try {
      file = await this.o.files.get(room.account_id, fileId);
    } catch (err) {
      if (err instanceof NotFoundError) throw new NotFoundError(`file_id: file ${fileId} not found`);
      throw err;
    }
    const conflict = () => new ConflictError(`file_id: file ${fileId} is already in this data room`);
    if (await this.o.db.dataRoomFiles.exists({ room_id: room._id, file_id: file._id })) throw conflict();
    await beforeWrite({ room_id: String(room._id), file_id: String(file._id), name: file.name, size: file.size });
    try {
      return await this.link(room, presentFile(file), by);
    } catch (err) {
      if (isDuplicateKey(err)) throw conflict();
      throw err;
    }
  }

  /** Records that `file` (checked, or just uploaded into the room) is in it. */
  async link(room: StoredRoom, file: FileRecord, by: Actor): Promise<DataRoomFile> {
    const entry = await this.o.db.dataRoomFiles.create({
      account_id: room.account_id, room_id: room._id, file_id: new Types.ObjectId(file.id), added_by: by,
    });
    return { ...file, added_at: entry.added_at.toISOString(), added_by: { type: by.type, id: by.id ?? null } };
  }

  /** Takes the file out of the room (the store keeps it); 404 when it is not in the room. */
  async removeFile(room: StoredRoom, fileId: string, beforeWrite: BeforeRoomFileWrite = nothing): Promise<void> {
    const _id = toObjectId(fileId);
    const entry = _id && await this.o.db.dataRoomFiles.findOne({ room_id: room._id, file_id: _id }).lean();
    if (!entry) throw roomFileNotFound(fileId);
    const file = await this.o.db.files.findOne({ _id, account_id: room.account_id }, { name: 1, size: 1 }).lean();
    await beforeWrite({ room_id: String(room._id), file_id: fileId, name: file?.name ?? '', size: file?.size ?? 0 });
    if ((await this.o.db.dataRoomFiles.deleteOne({ _id: entry._id })).deletedCount !== 1) throw roomFileNotFound(fileId);
  }
}

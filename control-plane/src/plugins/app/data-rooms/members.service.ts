import { Types } from 'mongoose';
import type {
  Actor, AddDataRoomMemberRequest, DataRoomMember, DataRoomMemberStatus, Page, PageQuery,
} from '@xfer/shared';
import type { Models } from '../../../models/index.js';
import type { DataRoomMemberDoc } from '../../../models/data-room-member.model.js';
import { ConflictError, GoneError, NotFoundError } from '../../../errors.js';
import { randomToken, sha256Hex } from '../../../lib/crypto.js';
import { paginate, toObjectId } from '../../../lib/pagination.js';
import { futureDate, roomExpired, type StoredRoom } from './data-rooms.service.js';

export type StoredMember = DataRoomMemberDoc & { _id: Types.ObjectId };

/** 32 random bytes, base64url without padding (as a share link's token). */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/** What an invite or a closed room answers (410s name why; 404 says nothing about the token). */
export const RoomMessages = {
  notFound: 'Invite not found',
  revoked: 'This invite has been revoked',
  expired: 'This invite has expired',
  roomExpired: 'This data room has expired',
  roomDeleted: 'This data room has been deleted',
} as const;

/** The URL of an invite, relative to the server's origin. */
export function inviteUrl(token: string): string {
  return `/api/v1/rooms/${token}`;
}

export function memberStatus(doc: StoredMember, now = new Date()): DataRoomMemberStatus {
  if (doc.revoked_at) return 'revoked';
  if (doc.expires_at && doc.expires_at <= now) return 'expired';
  return 'active';
}

/** The one read shape of a member: no account, no token hash. */
export function presentMember(doc: StoredMember, now = new Date()): DataRoomMember {
  return {
    id: String(doc._id),
    room_id: String(doc.room_id),
    email: doc.email,
    role: doc.role as DataRoomMember['role'],
    status: memberStatus(doc, now),
    expires_at: doc.expires_at ? doc.expires_at.toISOString() : null,
    revoked_at: doc.revoked_at ? doc.revoked_at.toISOString() : null,
    created_at: doc.created_at.toISOString(),
    created_by: { type: doc.created_by.type as Actor['type'], id: doc.created_by.id ?? null },
  };
}

/** What an audit record of an invite or a revoke names: never the token. */
export interface MemberSubject { room_id: string; member_id: string; email: string; role: string; expires_at: string | null }
export type BeforeMemberWrite = (subject: MemberSubject) => Promise<void>;
const nothing = async () => {};

const memberNotFound = (id: string) => new NotFoundError(`Member ${id} not found`);

/**
 * Members of data rooms (`app.dataRoomMembers`): outside parties holding an invite token, which
 * is kept only as its SHA-256 and leaves the server once, in the invite's answer.
 */
export class DataRoomMembersService {
  constructor(private readonly o: { db: Models }) {}

  /**
   * Invites `input.email` into `room`. 409 while an active member of that email exists (revoke
   * it first to send a new invite); `expires_at` must be in the future.
   */
  async add(room: StoredRoom, input: AddDataRoomMemberRequest, by: Actor, beforeWrite: BeforeMemberWrite = nothing): Promise<{ member: DataRoomMember; token: string }> {
    const expiresAt = futureDate('expires_at', input.expires_at);
    const email = input.email.trim().toLowerCase();
    const now = new Date();
    const same = await this.o.db.dataRoomMembers.find({ room_id: room._id, email, revoked_at: null }).lean();
    if (same.some((m) => memberStatus(m as StoredMember, now) === 'active')) {
      throw new ConflictError(`email: ${email} is already a member of this data room (revoke that member to send a new invite)`);
    }
    const token = randomToken(32);
    const _id = new Types.ObjectId();
    await beforeWrite({ room_id: String(room._id), member_id: String(_id), email, role: input.role, expires_at: expiresAt?.toISOString() ?? null });
    const doc = await this.o.db.dataRoomMembers.create({
      _id, account_id: room.account_id, room_id: room._id, email, role: input.role, token_hash: sha256Hex(token), expires_at: expiresAt, created_by: by,
    });
    return { member: presentMember(doc.toObject() as StoredMember), token };
  }

  list(room: StoredRoom, query: PageQuery): Promise<Page<DataRoomMember>> {
    const now = new Date();
    return paginate(this.o.db.dataRoomMembers, { room_id: room._id }, query, (doc) => presentMember(doc as StoredMember, now));
  }

  /** Revokes at once: the next request with the token is 410. Unknown and already revoked members are 404. */
  async revoke(room: StoredRoom, memberId: string, by: Actor, beforeWrite: BeforeMemberWrite = nothing): Promise<StoredMember> {
    const _id = toObjectId(memberId);
    const filter = { _id, room_id: room._id, revoked_at: null };
    const doc = _id && await this.o.db.dataRoomMembers.findOne(filter).lean() as StoredMember | null;
    if (!doc) throw memberNotFound(memberId);
    await beforeWrite({ room_id: String(room._id), member_id: memberId, email: doc.email, role: doc.role, expires_at: doc.expires_at?.toISOString() ?? null });
    const revoked = await this.o.db.dataRoomMembers.findOneAndUpdate(filter, { $set: { revoked_at: new Date(), revoked_by: by } }, { new: true }).lean();
    if (!revoked) throw memberNotFound(memberId);
    return revoked as StoredMember;
  }

  /**
   * The member of `token` and its room, for the token routes. A malformed or unknown token is
   * 404; a revoked or expired member, or a deleted or expired room, is 410 naming which. The
   * token is looked up by its SHA-256, never compared in clear (as a share link's).
   */
  async open(token: string): Promise<{ member: StoredMember; room: StoredRoom }> {
    const member = TOKEN.test(token) ? await this.o.db.dataRoomMembers.findOne({ token_hash: sha256Hex(token) }).lean() as StoredMember | null : null;
    if (!member) throw new NotFoundError(RoomMessages.notFound);
    const now = new Date();
    const status = memberStatus(member, now);
    if (status !== 'active') throw new GoneError(RoomMessages[status]);
    const room = await this.o.db.dataRooms.findOne({ _id: member.room_id, account_id: member.account_id }).lean() as StoredRoom | null;
    if (!room || room.deleted_at) throw new GoneError(RoomMessages.roomDeleted);
    if (roomExpired(room, now)) throw new GoneError(RoomMessages.roomExpired);
    return { member, room };
  }
}

import { Type, type Static } from '@sinclair/typebox';
import { Id, Name, PageQuery, StringEnum, Timestamp } from './common.js';
import { Actor } from './activity.js';
import { FileRecord } from './files.js';

/**
 * Data rooms (scope-areas.md "Data rooms"; docs/api.md "Data rooms"): a named set of the
 * account's files opened to outside parties, each invited as a member with a token of their own.
 */

/** `expired`: past the room's `expires_at`; members' invites answer 410 until it is moved on. */
export const DATA_ROOM_STATUSES = ['active', 'expired'] as const;
export type DataRoomStatus = (typeof DATA_ROOM_STATUSES)[number];

export const DATA_ROOM_ROLES = ['viewer', 'contributor'] as const;
export type DataRoomRole = (typeof DATA_ROOM_ROLES)[number];

/** One value by precedence: `revoked`, then `expired` (the member's own expiry). */
export const DATA_ROOM_MEMBER_STATUSES = ['active', 'expired', 'revoked'] as const;
export type DataRoomMemberStatus = (typeof DATA_ROOM_MEMBER_STATUSES)[number];

const Description = Type.Union([Type.String({ maxLength: 2000 }), Type.Null()]);
const ExpiresAt = Type.Union([Type.String({ format: 'date-time' }), Type.Null()]);
/**
 * How many bytes the files uploaded into the room may hold together (docs/api.md "Data rooms"):
 * an upload that would go past it answers 413 and keeps nothing. Files put in from the store do
 * not count: they take no new space.
 */
const QuotaBytes = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER });

export const DataRoom = Type.Object({
  id: Id,
  name: Type.String(),
  description: Type.Union([Type.String(), Type.Null()]),
  /** null: the room does not expire. */
  expires_at: Type.Union([Timestamp, Type.Null()]),
  status: StringEnum(DATA_ROOM_STATUSES),
  /** The room's upload quota (the service's `XFER_DATA_ROOM_QUOTA_BYTES` unless set). */
  quota_bytes: Type.Integer(),
  created_at: Timestamp,
  updated_at: Timestamp,
  created_by: Actor,
});
export type DataRoom = Static<typeof DataRoom>;

export const CreateDataRoomRequest = Type.Object(
  { name: Name, description: Type.Optional(Description), expires_at: Type.Optional(ExpiresAt), quota_bytes: Type.Optional(QuotaBytes) },
  { additionalProperties: false },
);
export type CreateDataRoomRequest = Static<typeof CreateDataRoomRequest>;

/** Any of the fields; `null` clears the description or the expiry. */
export const UpdateDataRoomRequest = Type.Object(
  { name: Type.Optional(Name), description: Type.Optional(Description), expires_at: Type.Optional(ExpiresAt), quota_bytes: Type.Optional(QuotaBytes) },
  { additionalProperties: false },
);
export type UpdateDataRoomRequest = Static<typeof UpdateDataRoomRequest>;

export const ListDataRoomsQuery = Type.Composite([PageQuery, Type.Object({})], { additionalProperties: false });
export type ListDataRoomsQuery = Static<typeof ListDataRoomsQuery>;

/** A file of a room: the store's file record, plus when and by whom it was put in the room. */
export const DataRoomFile = Type.Intersect([
  FileRecord,
  Type.Object({ added_at: Timestamp, added_by: Actor }),
]);
export type DataRoomFile = Static<typeof DataRoomFile>;

export const AddDataRoomFileRequest = Type.Object({ file_id: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });
export type AddDataRoomFileRequest = Static<typeof AddDataRoomFileRequest>;

export const DataRoomFileParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  file_id: Type.String({ minLength: 1, maxLength: 64 }),
});
export type DataRoomFileParams = Static<typeof DataRoomFileParams>;

export const DataRoomMember = Type.Object({
  id: Id,
  room_id: Id,
  email: Type.String(),
  role: StringEnum(DATA_ROOM_ROLES),
  status: StringEnum(DATA_ROOM_MEMBER_STATUSES),
  /** null: the member's access ends with the room's. */
  expires_at: Type.Union([Timestamp, Type.Null()]),
  revoked_at: Type.Union([Timestamp, Type.Null()]),
  created_at: Timestamp,
  created_by: Actor,
});
export type DataRoomMember = Static<typeof DataRoomMember>;

/** Answer of an invite: the member with its token and URL, shown this once only. */
export const CreatedDataRoomMember = Type.Intersect([
  DataRoomMember,
  Type.Object({
    token: Type.String(),
    /** `/api/v1/rooms/<token>`, relative to the server's origin. */
    invite_url: Type.String(),
  }),
]);
export type CreatedDataRoomMember = Static<typeof CreatedDataRoomMember>;

export const AddDataRoomMemberRequest = Type.Object(
  {
    email: Type.String({ format: 'email', maxLength: 320 }),
    role: StringEnum(DATA_ROOM_ROLES),
    expires_at: Type.Optional(ExpiresAt),
  },
  { additionalProperties: false },
);
export type AddDataRoomMemberRequest = Static<typeof AddDataRoomMemberRequest>;

export const DataRoomMemberParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 64 }),
  member_id: Type.String({ minLength: 1, maxLength: 64 }),
});
export type DataRoomMemberParams = Static<typeof DataRoomMemberParams>;

/** The token is checked by the handler (malformed is 404, like unknown), so the schema stays loose. */
export const RoomTokenParams = Type.Object({ token: Type.String() });
export type RoomTokenParams = Static<typeof RoomTokenParams>;

export const RoomTokenFileParams = Type.Object({ token: Type.String(), file_id: Type.String({ minLength: 1, maxLength: 64 }) });
export type RoomTokenFileParams = Static<typeof RoomTokenFileParams>;

/** `GET /rooms/:token`: the files are a page (newest first, up to 1000). */
export const RoomViewQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 1000 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    /** Set by the redirect after an upload through the page, which then says it worked. */
    notice: Type.Optional(StringEnum(['uploaded'] as const)),
  },
  { additionalProperties: false },
);
export type RoomViewQuery = Static<typeof RoomViewQuery>;

/** A file as an invited member sees it: nothing of the account's folders or people. */
export const RoomFile = Type.Object({
  id: Id, name: Type.String(), size: Type.Integer(), mime_type: Type.String(), sha256: Type.String(), added_at: Timestamp,
});
export type RoomFile = Static<typeof RoomFile>;

/** What an invited member sees: the room without its account-side fields, and its files. */
export const RoomView = Type.Object({
  room: Type.Object({
    id: Id,
    name: Type.String(),
    description: Type.Union([Type.String(), Type.Null()]),
    expires_at: Type.Union([Timestamp, Type.Null()]),
  }),
  member: Type.Object({ id: Id, email: Type.String(), role: StringEnum(DATA_ROOM_ROLES), expires_at: Type.Union([Timestamp, Type.Null()]) }),
  files: Type.Array(RoomFile),
  next_cursor: Type.Union([Type.String(), Type.Null()]),
});
export type RoomView = Static<typeof RoomView>;

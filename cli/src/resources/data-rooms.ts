import { Args, Flags } from '@oclif/core';
import { DATA_ROOM_ROLES, type DataRoom, type DataRoomFile, type DataRoomMember, type RoomFile } from '@xfer/shared';
import type { Column } from '../output.js';
import { formatBytes } from '../progress/index.js';

export const roomColumns: Column<DataRoom>[] = [
  { header: 'id', get: (r) => r.id },
  { header: 'name', get: (r) => r.name },
  { header: 'status', get: (r) => r.status },
  { header: 'expires_at', get: (r) => r.expires_at },
  { header: 'quota', get: (r) => formatBytes(r.quota_bytes) },
  { header: 'created_at', get: (r) => r.created_at },
];

export const roomFileColumns: Column<DataRoomFile>[] = [
  { header: 'id', get: (f) => f.id },
  { header: 'name', get: (f) => f.name },
  { header: 'size', get: (f) => formatBytes(f.size) },
  { header: 'added_by', get: (f) => `${f.added_by.type}:${f.added_by.id ?? ''}` },
  { header: 'added_at', get: (f) => f.added_at },
];

export const memberColumns: Column<DataRoomMember>[] = [
  { header: 'id', get: (m) => m.id },
  { header: 'email', get: (m) => m.email },
  { header: 'role', get: (m) => m.role },
  { header: 'status', get: (m) => m.status },
  { header: 'expires_at', get: (m) => m.expires_at },
];

/** What an invited party sees of a room's files. */
export const roomViewColumns: Column<RoomFile>[] = [
  { header: 'id', get: (f) => f.id },
  { header: 'name', get: (f) => f.name },
  { header: 'size', get: (f) => formatBytes(f.size) },
  { header: 'added_at', get: (f) => f.added_at },
];

export const roomIdArg = { id: Args.string({ description: 'Data room id', required: true }) };
export const inviteArg = {
  invite: Args.string({ description: 'The invite: its token, the invite_url of "data-rooms members add" (/api/v1/rooms/…) or an absolute URL', required: true }),
};

const expiresAt = Flags.string({ description: 'When access ends, an ISO 8601 date-time in the future (e.g. 2026-12-31T23:59:59Z)' });

/** Flags named after the API's fields: create needs a name, update takes any. */
const nameFlag = { description: 'Name shown to the invited parties' };
export const roomFlags = {
  name: Flags.string(nameFlag),
  description: Flags.string({ description: 'What the room is for (shown to the invited parties)' }),
  'expires-at': expiresAt,
  'quota-bytes': Flags.integer({ description: 'Bytes the files uploaded into the room may hold together (default: the service\'s, 10 GiB unless configured)', min: 1 }),
};
export const roomCreateFlags = { ...roomFlags, name: Flags.string({ ...nameFlag, required: true }) };

export const memberFlags = {
  email: Flags.string({ description: 'Who the invite is for (a label for the people managing the room; no mail is sent)', required: true }),
  role: Flags.string({ description: 'viewer: lists and downloads; contributor: also uploads', options: [...DATA_ROOM_ROLES], required: true }),
  'expires-at': expiresAt,
};

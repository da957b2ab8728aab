import type { Deleted, Page, PageQuery } from '../schemas/common.js';
import type {
  CreateDataRoomRequest, CreatedDataRoomMember, DataRoom, DataRoomFile, DataRoomMember, ListDataRoomsQuery, RoomFile, RoomView,
  RoomViewQuery, UpdateDataRoomRequest, AddDataRoomMemberRequest,
} from '../schemas/data-rooms.js';
import { download, type Download, type DownloadOptions } from './files.js';
import { multipartUpload, type UploadSource } from './multipart.js';
import type { PageIterator } from './paging.js';
import { Resource, seg } from './resource.js';
import type { CallSettings } from './transport.js';

/** What a member's upload answers: the file as the room shows it to its members. */
export type RoomUpload = RoomFile;

/**
 * `/data-rooms`: rooms of the account's files opened to invited outside parties, and
 * `/rooms/<token>`: what an invited party does with nothing but its invite (no key is sent).
 */
export class DataRoomsApi extends Resource {
  list(query?: ListDataRoomsQuery, s?: CallSettings): Promise<Page<DataRoom>> { return this.page('/data-rooms', query, s); }
  all(query?: ListDataRoomsQuery, s?: CallSettings): PageIterator<DataRoom> { return this.pager('/data-rooms', query, s); }
  get(id: string, s?: CallSettings): Promise<DataRoom> { return this.data('GET', `/data-rooms/${seg(id)}`, s); }
  create(body: CreateDataRoomRequest, s?: CallSettings): Promise<DataRoom> { return this.data('POST', '/data-rooms', { ...s, json: body }); }
  update(id: string, body: UpdateDataRoomRequest, s?: CallSettings): Promise<DataRoom> {
    return this.data('PUT', `/data-rooms/${seg(id)}`, { ...s, json: body });
  }
  /** Closes the room: every invite answers 410; the files stay in the store. */
  delete(id: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/data-rooms/${seg(id)}`, s); }

  files(id: string, query?: PageQuery, s?: CallSettings): Promise<Page<DataRoomFile>> { return this.page(`/data-rooms/${seg(id)}/files`, query, s); }
  allFiles(id: string, query?: PageQuery, s?: CallSettings): PageIterator<DataRoomFile> { return this.pager(`/data-rooms/${seg(id)}/files`, query, s); }
  /** Puts a file of the store in the room (needs files:read too). */
  addFile(id: string, fileId: string, s?: CallSettings): Promise<DataRoomFile> {
    return this.data('POST', `/data-rooms/${seg(id)}/files`, { ...s, json: { file_id: fileId } });
  }
  /** Streams a new file into the room (it lands in the store under `/data-rooms/<id>`; `source.path` is not sent). Never retried. */
  upload(id: string, source: UploadSource, s?: CallSettings): Promise<DataRoomFile> {
    const { body, contentType, contentLength } = multipartUpload({ ...source, path: undefined });
    return this.data('POST', `/data-rooms/${seg(id)}/upload`, { ...s, stream: { body, contentType, contentLength } });
  }
  /** Takes the file out of the room; the store keeps it. */
  removeFile(id: string, fileId: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/data-rooms/${seg(id)}/files/${seg(fileId)}`, s); }

  members(id: string, query?: PageQuery, s?: CallSettings): Promise<Page<DataRoomMember>> { return this.page(`/data-rooms/${seg(id)}/members`, query, s); }
  allMembers(id: string, query?: PageQuery, s?: CallSettings): PageIterator<DataRoomMember> { return this.pager(`/data-rooms/${seg(id)}/members`, query, s); }
  /** `data.token` and `data.invite_url` are shown this once. */
  addMember(id: string, body: AddDataRoomMemberRequest, s?: CallSettings): Promise<CreatedDataRoomMember> {
    return this.data('POST', `/data-rooms/${seg(id)}/members`, { ...s, json: body });
  }
  /** Revokes at once: the member's invite answers 410 from the next request. */
  removeMember(id: string, memberId: string, s?: CallSettings): Promise<Deleted> { return this.remove(`/data-rooms/${seg(id)}/members/${seg(memberId)}`, s); }

  /** An invited party's view of the room (no key sent): a token, the invite URL, or an absolute URL. */
  view(invite: string, query?: RoomViewQuery, s?: CallSettings): Promise<RoomView> {
    return this.data('GET', this.inviteUrl(invite), { ...s, query, auth: false });
  }
  /** An invited party's download of a file of the room (no key sent). */
  download(invite: string, fileId: string, opts?: DownloadOptions): Promise<Download> {
    return download(this.t, `${this.inviteUrl(invite)}/files/${seg(fileId)}/download`, { ...opts, auth: false });
  }
  /** A contributor's upload into the room (no key sent; scanned: 422 when blocked). Never retried. */
  contribute(invite: string, source: UploadSource, s?: CallSettings): Promise<RoomUpload> {
    const { body, contentType, contentLength } = multipartUpload({ ...source, path: undefined });
    return this.data('POST', `${this.inviteUrl(invite)}/upload`, { ...s, auth: false, stream: { body, contentType, contentLength } });
  }

  /** The absolute URL of an invite given by token, server-relative URL or absolute URL. */
  inviteUrl(invite: string): string {
    if (/^https?:\/\//i.test(invite)) return invite.replace(/\/+$/, '');
    if (invite.startsWith('/')) return new URL(invite, this.t.baseUrl).toString();
    return this.t.url(`/rooms/${seg(invite)}`).toString();
  }
}

import fp from 'fastify-plugin';
import { DataRoomsService } from './data-rooms.service.js';
import { DataRoomMembersService } from './members.service.js';

export {
  DataRoomsService, futureDate, presentRoom, roomFolder, type RoomFileSubject, type RoomSubject, type StoredRoom,
} from './data-rooms.service.js';
export {
  DataRoomMembersService, inviteUrl, presentMember, RoomMessages, type MemberSubject, type StoredMember,
} from './members.service.js';

declare module 'fastify' {
  interface FastifyInstance {
    dataRooms: DataRoomsService;
    dataRoomMembers: DataRoomMembersService;
  }
}

/**
 * Data rooms (`app.dataRooms`: rooms and their files, which are the file store's own) and their
 * invited members (`app.dataRoomMembers`). Registered after the files domain, whose files and
 * upload intake the rooms use.
 */
export default fp(
  async (app) => {
    app.decorate('dataRooms', new DataRoomsService({ db: app.db, files: app.files, defaultQuotaBytes: app.config.dataRoomQuotaBytes }));
    app.decorate('dataRoomMembers', new DataRoomMembersService({ db: app.db }));
  },
  { name: 'data-rooms', dependencies: ['mongoose', 'files'] },
);

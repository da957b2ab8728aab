import type { DataRoomFile } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { listFlags, printList } from '../../../resources/lists.js';
import { roomFileColumns, roomIdArg } from '../../../resources/data-rooms.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List the files of a data room (GET /data-rooms/:id/files).';
  static override description = 'Newest first, with who added each (an api_key, a user, or a room_member who uploaded it); one page by default, --all follows every page. Exit code 4 when the room is unknown.';
  static override examples = ['<%= config.bin %> data-rooms files list 665f1c2e9b1d4a0012345678', '<%= config.bin %> data-rooms files list 665f1c2e9b1d4a0012345678 --all --json'];
  static override args = roomIdArg;
  static override flags = listFlags;

  async run(): Promise<DataRoomFile[] | undefined> {
    const rooms = this.client().dataRooms;
    const id = this.args.id;
    return printList({ list: (q: object) => rooms.files(id, q), all: (q: object) => rooms.allFiles(id, q) }, this.flags, {}, roomFileColumns, this.listOutput);
  }
}

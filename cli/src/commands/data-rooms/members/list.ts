import type { DataRoomMember } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { listFlags, printList } from '../../../resources/lists.js';
import { memberColumns, roomIdArg } from '../../../resources/data-rooms.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List the members of a data room (GET /data-rooms/:id/members).';
  static override description = 'Revoked and expired members included (status active, expired or revoked); never their tokens. Newest first; one page by default, --all follows every page. Exit code 4 when the room is unknown.';
  static override examples = ['<%= config.bin %> data-rooms members list 665f1c2e9b1d4a0012345678', '<%= config.bin %> data-rooms members list 665f1c2e9b1d4a0012345678 --all --json'];
  static override args = roomIdArg;
  static override flags = listFlags;

  async run(): Promise<DataRoomMember[] | undefined> {
    const rooms = this.client().dataRooms;
    const id = this.args.id;
    return printList({ list: (q: object) => rooms.members(id, q), all: (q: object) => rooms.allMembers(id, q) }, this.flags, {}, memberColumns, this.listOutput);
  }
}

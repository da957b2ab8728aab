import type { DataRoom } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { roomColumns } from '../../resources/data-rooms.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List data rooms (GET /data-rooms).';
  static override description = 'Newest first; one page by default, --all follows every page. status is active or expired.';
  static override examples = ['<%= config.bin %> data-rooms list', '<%= config.bin %> data-rooms list --all --json'];
  static override flags = listFlags;

  async run(): Promise<DataRoom[] | undefined> {
    return printList(this.client().dataRooms, this.flags, {}, roomColumns, this.listOutput);
  }
}

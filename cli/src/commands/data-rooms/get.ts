import type { DataRoom } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { roomIdArg } from '../../resources/data-rooms.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show a data room (GET /data-rooms/:id).';
  static override description = 'Exit code 4 when the room is unknown or deleted.';
  static override examples = ['<%= config.bin %> data-rooms get 665f1c2e9b1d4a0012345678 --json'];
  static override args = roomIdArg;

  async run(): Promise<DataRoom> {
    const room = await this.client().dataRooms.get(this.args.id);
    this.print(record(room));
    return room;
  }
}

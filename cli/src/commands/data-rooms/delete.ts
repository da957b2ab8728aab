import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { roomIdArg } from '../../resources/data-rooms.js';

export default class Delete extends BaseCommand<typeof Delete> {
  static override summary = 'Delete a data room (DELETE /data-rooms/:id).';
  static override description = 'Every invite of the room answers 410 from now on; its files stay in the file store. Exit code 4 when the room is unknown or already deleted.';
  static override examples = ['<%= config.bin %> data-rooms delete 665f1c2e9b1d4a0012345678'];
  static override args = roomIdArg;

  async run(): Promise<Deleted> {
    const deleted = await this.client().dataRooms.delete(this.args.id);
    this.print(Messages.deleted('data room', deleted.id));
    return deleted;
  }
}

import { Args } from '@oclif/core';
import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { Messages } from '../../../messages.js';
import { roomIdArg } from '../../../resources/data-rooms.js';

export default class Remove extends BaseCommand<typeof Remove> {
  static override summary = 'Take a file out of a data room (DELETE /data-rooms/:id/files/:file_id).';
  static override description = 'The file stays in the store ("files delete" removes it there). Exit code 4 when the room is unknown or the file is not in it.';
  static override examples = ['<%= config.bin %> data-rooms files remove 665f1c2e9b1d4a0012345678 665f1c2e9b1d4a00aaaaaaaa'];
  static override args = { ...roomIdArg, 'file-id': Args.string({ description: 'Id of the file in the room', required: true }) };

  async run(): Promise<Deleted> {
    const removed = await this.client().dataRooms.removeFile(this.args.id, this.args['file-id']);
    this.print(Messages.deleted('data room file', removed.id));
    return removed;
  }
}

import { Args } from '@oclif/core';
import type { DataRoomFile } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { record } from '../../../output.js';
import { roomIdArg } from '../../../resources/data-rooms.js';

export default class Add extends BaseCommand<typeof Add> {
  static override summary = 'Put a file of the store in a data room (POST /data-rooms/:id/files).';
  static override description = `The room's members can then download it. Needs files:read as well as data-rooms:write (403 otherwise).
Exit code 4 when the room or the file is unknown or deleted, 5 when the file is in the room already.`;
  static override examples = ['<%= config.bin %> data-rooms files add 665f1c2e9b1d4a0012345678 665f1c2e9b1d4a00aaaaaaaa'];
  static override args = { ...roomIdArg, 'file-id': Args.string({ description: 'Id of a file of the store', required: true }) };

  async run(): Promise<DataRoomFile> {
    const file = await this.client().dataRooms.addFile(this.args.id, this.args['file-id']);
    this.print(record(file));
    return file;
  }
}

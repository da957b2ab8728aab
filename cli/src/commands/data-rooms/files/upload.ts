import { Args, Flags } from '@oclif/core';
import type { DataRoomFile } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { record } from '../../../output.js';
import { progressFlags } from '../../../progress/index.js';
import { roomIdArg } from '../../../resources/data-rooms.js';
import { uploadLocalFile } from '../../../resources/files.js';

export default class Upload extends BaseCommand<typeof Upload> {
  static override summary = 'Upload a file into a data room (POST /data-rooms/:id/upload).';
  static override description = `Streams the file as "files upload" does (never held in memory, scanned for malware before it is kept); it lands in the store under /data-rooms/<room id> and in the room. - reads stdin, then --name is required.
Needs files:write and files:read as well as data-rooms:write. Exit code 2 when the server refuses the content (422 malware found, 413 too large), 4 when the room is unknown, 6 when the scanner or the store is unavailable.`;
  static override examples = ['<%= config.bin %> data-rooms files upload 665f1c2e9b1d4a0012345678 term-sheet.pdf'];
  static override args = { ...roomIdArg, 'local-path': Args.string({ description: 'File to upload, or - for stdin', required: true }) };
  static override flags = {
    name: Flags.string({ description: 'Name to store the file under (default: the local file name)' }),
    ...progressFlags,
  };

  async run(): Promise<DataRoomFile> {
    const file = await uploadLocalFile(this.args['local-path'], { name: this.flags.name, json: this.jsonEnabled(), quiet: this.flags.quiet },
      (source, settings) => this.client().dataRooms.upload(this.args.id, source, settings));
    this.print(record(file));
    return file;
  }
}

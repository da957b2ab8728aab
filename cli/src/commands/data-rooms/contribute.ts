import { Args, Flags } from '@oclif/core';
import type { RoomUpload } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { progressFlags } from '../../progress/index.js';
import { inviteArg } from '../../resources/data-rooms.js';
import { uploadLocalFile } from '../../resources/files.js';

export default class Contribute extends BaseCommand<typeof Contribute> {
  static override summary = 'Upload a file into a data room as an invited contributor, without an account (POST /rooms/:token/upload).';
  static override description = `Needs no login or API key, as "data-rooms open"; the invite must be a contributor's (a viewer's is 403). The file streams as "files upload" does and is scanned for malware before it is kept. - reads stdin, then --name is required.
Exit code 2 when the server refuses the content (422 malware found, 413 too large), 3 for a viewer's invite, 4 when the invite is unknown or 410 (gone), 6 when the scanner or the store is unavailable.`;
  static override examples = ['<%= config.bin %> data-rooms contribute https://xfer.example.com/api/v1/rooms/3q2-7wE… signed-nda.pdf'];
  static override args = { ...inviteArg, 'local-path': Args.string({ description: 'File to upload, or - for stdin', required: true }) };
  static override flags = {
    name: Flags.string({ description: 'Name to store the file under (default: the local file name)' }),
    ...progressFlags,
  };

  async run(): Promise<RoomUpload> {
    const invite = this.args.invite;
    const url = /^https?:\/\//i.test(invite) ? invite : this.resolveUrl();
    if (!url) throw usageError(Messages.noUrl(this.flags.profile));
    const file = await uploadLocalFile(this.args['local-path'], { name: this.flags.name, json: this.jsonEnabled(), quiet: this.flags.quiet },
      (source, settings) => this.client({ url }).dataRooms.contribute(invite, source, settings));
    this.print(record(file));
    return file;
  }
}

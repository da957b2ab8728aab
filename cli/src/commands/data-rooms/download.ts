import { Args } from '@oclif/core';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { downloadFlags, downloadRequest, saveDownload, savedLine, type SavedFile } from '../../resources/files.js';
import { inviteArg } from '../../resources/data-rooms.js';

export default class Download extends BaseCommand<typeof Download> {
  static override summary = 'Download a file of a data room as an invited party, without an account (GET /rooms/:token/files/:file_id/download).';
  static override description = `Needs no login or API key, as "data-rooms open". Same output rules as "files download": written to <output>.xfer-part and renamed once complete and its SHA-256 verified, an existing file kept unless --force, - for stdout; --continue needs --output.
Exit code 4 when the invite or the file is unknown, or 410 (the invite or its room is gone).`;
  static override examples = ['<%= config.bin %> data-rooms download https://xfer.example.com/api/v1/rooms/3q2-7wE… 665f1c2e9b1d4a00aaaaaaaa -o deck.pdf'];
  static override args = { ...inviteArg, 'file-id': Args.string({ description: 'Id of the file (from "data-rooms open")', required: true }) };
  static override flags = downloadFlags;

  async run(): Promise<SavedFile> {
    const invite = this.args.invite;
    const url = /^https?:\/\//i.test(invite) ? invite : this.resolveUrl();
    if (!url) throw usageError(Messages.noUrl(this.flags.profile));
    const rooms = this.client({ url }).dataRooms;
    const saved = await saveDownload(downloadRequest(this.flags, this.jsonEnabled(), (range, signal) => rooms.download(invite, this.args['file-id'], { range, signal })));
    if (saved.file) this.print(savedLine(saved));
    return saved;
  }
}

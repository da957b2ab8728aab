import type { RoomView } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record, table } from '../../output.js';
import { inviteArg, roomViewColumns } from '../../resources/data-rooms.js';

export default class Open extends BaseCommand<typeof Open> {
  static override summary = 'Show a data room as an invited party, without an account (GET /rooms/:token).';
  static override description = `Needs no login or API key: only the server URL (XFER_URL, --url or the profile's) for a token or a relative invite_url, nothing at all for an absolute URL. The visit is recorded in the room's audit trail.
Exit code 4 when the invite is unknown, or 410: revoked, expired, or its room deleted or expired (the server's reason is the error line).`;
  static override examples = ['<%= config.bin %> data-rooms open https://xfer.example.com/api/v1/rooms/3q2-7wE…', '<%= config.bin %> data-rooms open 3q2-7wE… --url https://xfer.example.com/api/v1 --json'];
  static override args = inviteArg;

  async run(): Promise<RoomView> {
    const invite = this.args.invite;
    const url = /^https?:\/\//i.test(invite) ? invite : this.resolveUrl();
    if (!url) throw usageError(Messages.noUrl(this.flags.profile));
    const view = await this.client({ url }).dataRooms.view(invite);
    this.print(record({ ...view.room, role: view.member.role, email: view.member.email }));
    this.print(view.files.length > 0 ? table(view.files, roomViewColumns) : Messages.empty);
    return view;
  }
}

import type { CreatedDataRoomMember, DataRoomRole } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { Messages } from '../../../messages.js';
import { record } from '../../../output.js';
import { memberFlags, roomIdArg } from '../../../resources/data-rooms.js';

export default class Add extends BaseCommand<typeof Add> {
  static override summary = 'Invite someone into a data room (POST /data-rooms/:id/members).';
  static override description = `Answers the invite URL, which is all the invited party needs (no account): a browser shows the room's files, with an upload form for a contributor; "data-rooms open|download|contribute" do the same from a shell.
The token and invite_url are in this answer only (lists never show them). The human output shows the absolute URL; --json prints the API's data as is, where invite_url is relative to the server's origin.
A viewer's invite needs files:read, a contributor's files:write too; an expiring key must give --expires-at within its own life. Exit code 4 when the room is unknown, 5 when that email has an active invite already.`;
  static override examples = [
    '<%= config.bin %> data-rooms members add 665f1c2e9b1d4a0012345678 --email counsel@partner.example --role viewer --expires-at 2026-12-31T00:00:00Z',
    'url=$(<%= config.bin %> data-rooms members add 665f1c2e9b1d4a0012345678 --email cfo@partner.example --role contributor --json | jq -r .invite_url)',
  ];
  static override args = roomIdArg;
  static override flags = memberFlags;

  async run(): Promise<CreatedDataRoomMember> {
    const f = this.flags;
    const rooms = this.client().dataRooms;
    const member = await rooms.addMember(this.args.id, {
      email: f.email, role: f.role as DataRoomRole, ...(f['expires-at'] !== undefined && { expires_at: f['expires-at'] }),
    });
    this.print(record({ ...member, invite_url: rooms.inviteUrl(member.invite_url) }));
    this.note(Messages.inviteShownOnce);
    return member;
  }
}

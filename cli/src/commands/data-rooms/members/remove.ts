import { Args } from '@oclif/core';
import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { Messages } from '../../../messages.js';
import { roomIdArg } from '../../../resources/data-rooms.js';

export default class Remove extends BaseCommand<typeof Remove> {
  static override summary = 'Revoke a member of a data room (DELETE /data-rooms/:id/members/:member_id).';
  static override description = 'At once: the next request with the invite answers 410. The member stays listed as revoked. Exit code 4 when the room or the member is unknown, or already revoked.';
  static override examples = ['<%= config.bin %> data-rooms members remove 665f1c2e9b1d4a0012345678 665f1c2e9b1d4a00bbbbbbbb'];
  static override args = { ...roomIdArg, 'member-id': Args.string({ description: 'Member id (from "data-rooms members list")', required: true }) };

  async run(): Promise<Deleted> {
    const removed = await this.client().dataRooms.removeMember(this.args.id, this.args['member-id']);
    this.print(Messages.deleted('data room member', removed.id));
    return removed;
  }
}

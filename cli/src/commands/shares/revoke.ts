import { Args } from '@oclif/core';
import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { fileIdArg } from '../../resources/shares.js';

export default class Revoke extends BaseCommand<typeof Revoke> {
  static override summary = 'Revoke a share link (DELETE /files/:id/share/:share_id).';
  static override description = 'The link answers 410 from now on; it stays listed with status revoked. Exit code 4 when the link is unknown, not of that file, or already revoked.';
  static override examples = ['<%= config.bin %> shares revoke 665f1c2e9b1d4a0012345678 6660aa0b9b1d4a0012345679'];
  static override args = { ...fileIdArg, 'share-id': Args.string({ description: 'Id of the share link (shares list)', required: true }) };

  async run(): Promise<Deleted> {
    const revoked = await this.client().shares.revoke(this.args['file-id'], this.args['share-id']);
    this.print(Messages.deleted('share link', revoked.id));
    return revoked;
  }
}

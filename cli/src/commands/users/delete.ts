import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { userIdArg } from '../../resources/users.js';

export default class Delete extends BaseCommand<typeof Delete> {
  static override summary = 'Remove a user from the account (DELETE /users/:id).';
  static override description = 'Only an owner deletes an owner (exit code 3 otherwise). Exit code 5 for your own user or the last owner; 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> users delete 665f1c2e9b1d4a0012345678'];
  static override args = userIdArg;

  async run(): Promise<Deleted> {
    const deleted = await this.client().users.delete(this.args.id);
    this.print(Messages.deleted('user', deleted.id));
    return deleted;
  }
}

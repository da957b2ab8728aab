import type { User } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { userIdArg } from '../../resources/users.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show a user (GET /users/:id).';
  static override description = 'Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> users get 665f1c2e9b1d4a0012345678', '<%= config.bin %> users get 665f1c2e9b1d4a0012345678 --json | jq -r .role'];
  static override args = userIdArg;

  async run(): Promise<User> {
    const user = await this.client().users.get(this.args.id);
    this.print(record(user));
    return user;
  }
}

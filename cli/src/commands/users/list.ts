import type { User } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { userColumns } from '../../resources/users.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List the users of the account (GET /users).';
  static override description = 'One page by default; --all follows every page. Needs users:read.';
  static override examples = ['<%= config.bin %> users list', `<%= config.bin %> users list --all --json | jq -r '.[] | select(.role == "owner") | .email'`];
  static override flags = listFlags;

  async run(): Promise<User[] | undefined> {
    return printList(this.client().users, this.flags, {}, userColumns, this.listOutput);
  }
}

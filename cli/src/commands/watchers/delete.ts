import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { watcherIdArg } from '../../resources/watchers.js';

export default class Delete extends BaseCommand<typeof Delete> {
  static override summary = 'Delete a watcher (DELETE /watchers/:id).';
  static override description = 'Its agent stops polling the folder within moments; its events go with it, the transfers they created stay. Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> watchers delete 665f1c2e9b1d4a0012345678'];
  static override args = watcherIdArg;

  async run(): Promise<Deleted> {
    const deleted = await this.client().watchers.delete(this.args.id);
    this.print(Messages.deleted('watcher', deleted.id));
    return deleted;
  }
}

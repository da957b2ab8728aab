import type { Watcher } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { watcherColumns } from '../../resources/watchers.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List watchers (GET /watchers).';
  static override description = 'Newest first, one page by default; --all follows every page. AGENT_ID is the agent polling the folder (- while none may), LAST_ERROR why its last poll failed.';
  static override examples = ['<%= config.bin %> watchers list', '<%= config.bin %> watchers list --all --json'];
  static override flags = listFlags;

  async run(): Promise<Watcher[] | undefined> {
    return printList(this.client().watchers, this.flags, {}, watcherColumns, this.listOutput);
  }
}

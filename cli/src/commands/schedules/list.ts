import type { Schedule } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { scheduleColumns } from '../../resources/schedules.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List schedules (GET /schedules).';
  static override description = 'Newest first, one page by default; --all follows every page. LAST_STATUS is the last run\'s: its transfer\'s status as it is now, or skipped.';
  static override examples = ['<%= config.bin %> schedules list', '<%= config.bin %> schedules list --all --json'];
  static override flags = listFlags;

  async run(): Promise<Schedule[] | undefined> {
    return printList(this.client().schedules, this.flags, {}, scheduleColumns, this.listOutput);
  }
}

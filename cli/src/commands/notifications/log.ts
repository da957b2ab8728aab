import type { NotificationLogEntry, NotificationStatus } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { logColumns, logStatusFlag } from '../../resources/notifications.js';

export default class Log extends BaseCommand<typeof Log> {
  static override summary = 'List the notifications sent or being sent (GET /notifications/log).';
  static override description = `Newest first, one page by default; --all follows every page. A pending notification is being retried (its error is the last attempt's); failed ones gave up after the retry window.`;
  static override examples = ['<%= config.bin %> notifications log', '<%= config.bin %> notifications log --status failed --all --json'];
  static override flags = { ...listFlags, status: logStatusFlag };

  async run(): Promise<NotificationLogEntry[] | undefined> {
    const api = this.client().notifications;
    const source = { list: api.log.bind(api), all: api.allLog.bind(api) };
    return printList(source, this.flags, { status: this.flags.status as NotificationStatus | undefined }, logColumns, this.listOutput);
  }
}

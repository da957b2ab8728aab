import type { AuditEvent } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { auditEventColumns } from '../../resources/activity.js';
import { listFlags, printList } from '../../resources/lists.js';
import { CONSOLE_ONLY, loginEventsOf } from '../../resources/settings.js';

export default class LoginEvents extends BaseCommand<typeof LoginEvents> {
  static override summary = 'List your own logins and login failures (GET /settings/login-events).';
  static override description = `Newest first, one page by default; --all follows every page. The same records as activity list, yours only. ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings login-events', `<%= config.bin %> settings login-events --all --json | jq '.[] | select(.outcome != "success")'`];
  static override flags = listFlags;

  async run(): Promise<AuditEvent[] | undefined> {
    return printList(loginEventsOf(this.client()), this.flags, {}, auditEventColumns, this.listOutput);
  }
}

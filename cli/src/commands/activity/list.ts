import type { AuditEvent } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { table } from '../../output.js';
import { activityFilterFlags, activityQuery, auditEventColumns } from '../../resources/activity.js';
import { listFlags, printList } from '../../resources/lists.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = "List the account's audit trail (GET /activity).";
  static override description = `Newest first, one page by default; --all follows every page. Every filter of the API is a flag, and they combine. The table shows time, actor (type:id), action, resource (type:id) and outcome (success, failure, denied); --json adds ip and details.
A --since/--until that is not an ISO 8601 time is exit code 2.`;
  static override examples = [
    '<%= config.bin %> activity list',
    '<%= config.bin %> activity list --action user.login --since 2026-01-01T00:00:00Z --all --json',
    '<%= config.bin %> activity list --resource-type webhook --resource-id 665f1c2e9b1d4a0012345678',
  ];
  static override flags = { ...listFlags, ...activityFilterFlags };

  async run(): Promise<AuditEvent[] | undefined> {
    return printList(this.client().activity, this.flags, activityQuery(this.flags), auditEventColumns, this.listOutput);
  }
}

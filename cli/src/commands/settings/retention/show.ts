import type { RetentionSetting } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { record } from '../../../output.js';
import { CONSOLE_ONLY } from '../../../resources/settings.js';

export default class Show extends BaseCommand<typeof Show> {
  static override summary = "Show the account's retention policy (GET /settings/retention).";
  static override description = `How many days audit records (audit_days) and deleted files (deleted_files_days) are kept; updated_at is null while the defaults apply. ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings retention show', '<%= config.bin %> settings retention show --json | jq .audit_days'];

  async run(): Promise<RetentionSetting> {
    const retention = await this.client().settings.getRetention();
    this.print(record(retention));
    return retention;
  }
}

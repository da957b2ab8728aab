import { Flags } from '@oclif/core';
import { RETENTION_LIMITS, type RetentionSetting, type UpdateRetentionRequest } from '@xfer/shared';
import { BaseCommand, usageError } from '../../../base-command.js';
import { Messages } from '../../../messages.js';
import { record } from '../../../output.js';
import { CONSOLE_ONLY } from '../../../resources/settings.js';

const { audit_days: audit, deleted_files_days: deleted } = RETENTION_LIMITS;

export default class Update extends BaseCommand<typeof Update> {
  static override summary = "Change the account's retention policy (PUT /settings/retention).";
  static override description = `Only the values given change. Owners and admins only (exit code 3 otherwise). ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings retention update --audit-days 730', '<%= config.bin %> settings retention update --deleted-files-days 7 --json'];
  static override flags = {
    'audit-days': Flags.integer({ description: `Days audit records are kept (${audit.min}-${audit.max}, default ${audit.default})`, min: audit.min, max: audit.max }),
    'deleted-files-days': Flags.integer({
      description: `Days deleted files are kept (${deleted.min}-${deleted.max}, default ${deleted.default})`, min: deleted.min, max: deleted.max,
    }),
  };

  async run(): Promise<RetentionSetting> {
    const f = this.flags;
    const body: UpdateRetentionRequest = {
      ...(f['audit-days'] !== undefined && { audit_days: f['audit-days'] }),
      ...(f['deleted-files-days'] !== undefined && { deleted_files_days: f['deleted-files-days'] }),
    };
    if (Object.keys(body).length === 0) throw usageError(Messages.nothingToUpdate);
    const retention = await this.client().settings.updateRetention(body);
    this.print(record(retention));
    return retention;
  }
}

import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { scheduleIdArg } from '../../resources/schedules.js';

export default class Delete extends BaseCommand<typeof Delete> {
  static override summary = 'Delete a schedule (DELETE /schedules/:id).';
  static override description = 'Its run history goes with it; the transfers its runs created stay. Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> schedules delete 665f1c2e9b1d4a0012345678'];
  static override args = scheduleIdArg;

  async run(): Promise<Deleted> {
    const deleted = await this.client().schedules.delete(this.args.id);
    this.print(Messages.deleted('schedule', deleted.id));
    return deleted;
  }
}

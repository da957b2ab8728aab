import type { Schedule } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { scheduleIdArg } from '../../resources/schedules.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show a schedule (GET /schedules/:id).';
  static override description = 'With its next due time (next_run_at) and how its last run went. Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> schedules get 665f1c2e9b1d4a0012345678', '<%= config.bin %> schedules get 665f1c2e9b1d4a0012345678 --json'];
  static override args = scheduleIdArg;

  async run(): Promise<Schedule> {
    const schedule = await this.client().schedules.get(this.args.id);
    this.print(record(schedule));
    return schedule;
  }
}

import type { Schedule, UpdateScheduleRequest } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { givesTransfer, scheduleIdArg, scheduleUpdateFlags, targetInput, timingInput } from '../../resources/schedules.js';

export default class Update extends BaseCommand<typeof Update> {
  static override summary = 'Change a schedule (GET /schedules/:id, PUT /schedules/:id).';
  static override description = `Only the fields given change. A new --cron, --timezone or --active moves next_run_at to the first due time after now (times missed while paused are not caught up).
The transfer flags change only what they name: the schedule's transfer is read first and sent back whole with them applied (a schedule that runs a workflow has none: give all four of --source, --source-path, --dest, --dest-path to make it run a transfer). --workflow makes it run that workflow instead of its transfer.
Exit code 2 when a field is refused, 4 when the id is unknown.`;
  static override examples = [
    '<%= config.bin %> schedules update 665f1c2e9b1d4a0012345678 --no-active',
    '<%= config.bin %> schedules update 665f1c2e9b1d4a0012345678 --cron "30 3 * * 1-5" --timezone America/New_York',
    '<%= config.bin %> schedules update 665f1c2e9b1d4a0012345678 --dest-path "/mirror/{{date:YYYY}}/{{run.id}}"',
  ];
  static override args = scheduleIdArg;
  static override flags = scheduleUpdateFlags;

  async run(): Promise<Schedule> {
    const client = this.client();
    const f = this.flags;
    const current = givesTransfer(f) ? (await client.schedules.get(this.args.id)).transfer : null;
    const body: UpdateScheduleRequest = { ...timingInput(f), ...await targetInput(client, f, current) };
    if (Object.keys(body).length === 0) throw usageError(Messages.nothingToUpdate);
    const schedule = await client.schedules.update(this.args.id, body);
    this.print(record(schedule));
    return schedule;
  }
}

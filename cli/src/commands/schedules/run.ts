import type { ScheduleRun } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { scheduleIdArg } from '../../resources/schedules.js';

export default class Run extends BaseCommand<typeof Run> {
  static override summary = 'Run a schedule now (POST /schedules/:id/run).';
  static override description = `Creates the schedule's transfer now and queues it (or starts a run of its workflow), paused schedules included; --overlap applies as to a due time (a skipped run says why). Prints the run without waiting: follow it with "transfers watch <transfer_id>" (or "workflow-runs watch <workflow_run_id>").
Exit code 4 when the id is unknown.`;
  static override examples = [
    '<%= config.bin %> schedules run 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> transfers watch "$(<%= config.bin %> schedules run 665f1c2e9b1d4a0012345678 --json | jq -r .transfer_id)"',
  ];
  static override args = scheduleIdArg;

  async run(): Promise<ScheduleRun> {
    const run = await this.client().schedules.run(this.args.id);
    this.print(record(run));
    return run;
  }
}

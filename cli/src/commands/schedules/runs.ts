import type { ScheduleRun } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { scheduleIdArg, scheduleRunColumns } from '../../resources/schedules.js';

export default class Runs extends BaseCommand<typeof Runs> {
  static override summary = "List a schedule's runs (GET /schedules/:id/runs).";
  static override description = `Newest first, one page by default; --all follows every page. A run's status is its transfer's (or workflow run's) as it is now; skipped and failed runs say why in ERROR.
Exit code 4 when the schedule id is unknown.`;
  static override examples = [
    '<%= config.bin %> schedules runs 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> schedules runs 665f1c2e9b1d4a0012345678 --all --json',
  ];
  static override args = scheduleIdArg;
  static override flags = listFlags;

  async run(): Promise<ScheduleRun[] | undefined> {
    const schedules = this.client().schedules;
    const id = this.args.id;
    const runs = { list: schedules.runs.bind(schedules, id), all: schedules.allRuns.bind(schedules, id) };
    return printList(runs, this.flags, {}, scheduleRunColumns, this.listOutput);
  }
}

import type { Schedule } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { scheduleCreateFlags, targetInput, timingInput } from '../../resources/schedules.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = 'Create a schedule that runs a transfer or a workflow on a cron timetable (GET /connections, POST /schedules).';
  static override description = `--cron has five fields (minute hour day-of-month month day-of-week), read in --timezone (an IANA name, default UTC). Each due time creates a transfer from --source:--source-path to --dest:--dest-path and queues it for an agent, or, with --workflow, starts a run of that workflow (exactly one of the two).
The paths may hold {{params.NAME}} (a global parameter, not a secret one), {{date:YYYY-MM-DD}} (the due time in the schedule's zone) and {{run.id}}; quote them for the shell.
--overlap skip (the default) skips a due time while the previous run's transfer (or workflow run) has not ended; queue runs it anyway. --no-active creates it paused.
Exit code 2 when a field is refused (the message names it), 4 when a connection name is unknown.`;
  static override examples = [
    '<%= config.bin %> schedules create --name nightly-mirror --cron "0 2 * * *" --timezone Europe/Berlin --source s3-prod --source-path /exports --dest sftp-backup --dest-path "/mirror/{{date:YYYY-MM-DD}}"',
    '<%= config.bin %> schedules create --name every-15-min --cron "*/15 * * * *" --source nas --source-path /in --dest archive --dest-path / --overlap queue --json | jq -r .id',
    '<%= config.bin %> schedules create --name nightly-ingest --cron "0 3 * * *" --workflow nightly-export',
  ];
  static override flags = scheduleCreateFlags;

  async run(): Promise<Schedule> {
    const client = this.client();
    const f = this.flags;
    const schedule = await client.schedules.create({ ...timingInput(f), name: f.name, cron: f.cron, ...await targetInput(client, f) });
    this.print(record(schedule));
    return schedule;
  }
}

import { Flags } from '@oclif/core';
import type { WorkflowRun } from '@xfer/shared';
import { Messages } from '../../messages.js';
import { progressFlags } from '../../progress/index.js';
import { RunFollowCommand } from '../../resources/workflow-runs.js';
import { runParams, showRun, workflowId, workflowIdArg } from '../../resources/workflows.js';

export default class Run extends RunFollowCommand<typeof Run> {
  static override summary = 'Run a workflow now, and with --follow follow the run to its end (GET /workflows, POST /workflows/:id/run, GET /workflow-runs/:id, GET /transfers/:id).';
  static override description = `Prints the run as it started. --param NAME=VALUE (repeatable) gives {{params.NAME}} a value for this run, over the account's parameter of that name; values on the command line show in the shell history and the process list.
--follow follows the run until it ends: a line on stderr each time the run or a step changes state, and while a transfer step runs its transfer's progress (files, bytes; a live view on a terminal, a line every 5 s otherwise, none with --quiet or with --json in a pipe). stdout gets the final run (with --json, the WorkflowRun), also when it failed.
Exit code 0 when the run completed; with --follow, 7 (as for a failed transfer) when it failed or was cancelled, with the run's error as the one stderr line. 4 when the workflow (id or name, as for "workflows get") is unknown, 2 when a parameter is refused.
Ctrl-C while following only stops following (exit 130): the run carries on; "workflow-runs watch <run id>" picks it up again, "workflow-runs cancel <run id>" cancels it.`;
  static override examples = [
    '<%= config.bin %> workflows run 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> workflows run nightly-export --param region=us --follow',
    '<%= config.bin %> workflows run 665f1c2e9b1d4a0012345678 --follow --quiet --json | jq \'.steps[] | {type, status, error}\'',
  ];
  static override args = workflowIdArg;
  static override flags = {
    param: Flags.string({ description: 'NAME=VALUE: a value for {{params.NAME}} in this run (repeatable)', multiple: true, multipleNonGreedy: true }),
    follow: Flags.boolean({ description: 'Follow the run until it ends; the exit code says how it ended' }),
    ...progressFlags,
  };

  async run(): Promise<WorkflowRun> {
    const client = this.client();
    const params = runParams(this.flags.param);
    const started = await client.workflows.run(await workflowId(client, this.args.id), params);
    if (this.flags.follow) return this.followToEnd(client, started);
    this.print(showRun(started));
    this.note(Messages.runStarted(started.id));
    return started;
  }
}

import type { WorkflowRun } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { showRun, workflowRunIdArg } from '../../resources/workflows.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show a workflow run with the status of each step (GET /workflow-runs/:id).';
  static override description = `Its fields (status, trigger, the names of the run parameters it was given, error), then its steps: status, a transfer step's transfer id, what a move_source or delete_source step did with the files (moved, deleted, gone, changed, unverified, failed), the step's error. Returns at once, whatever the state: "workflow-runs watch" follows a run.
Exit code 4 when the id is unknown.`;
  static override examples = [
    '<%= config.bin %> workflow-runs get 665f1c2e9b1d4a0012345679',
    '<%= config.bin %> workflow-runs get 665f1c2e9b1d4a0012345679 --json | jq -r .status',
  ];
  static override args = workflowRunIdArg;

  async run(): Promise<WorkflowRun> {
    const run = await this.client().workflows.getRun(this.args.id);
    this.print(showRun(run));
    return run;
  }
}

import type { WorkflowRun } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { showRun, workflowRunIdArg } from '../../resources/workflows.js';

export default class Cancel extends BaseCommand<typeof Cancel> {
  static override summary = 'Cancel a queued or running workflow run (POST /workflow-runs/:id/cancel).';
  static override description = 'Its running transfer is cancelled and the steps not started are not run; files already copied stay. Prints the run. Exit code 5 when the run has already ended, 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> workflow-runs cancel 665f1c2e9b1d4a0012345679', '<%= config.bin %> workflow-runs cancel 665f1c2e9b1d4a0012345679 --json | jq -r .status'];
  static override args = workflowRunIdArg;

  async run(): Promise<WorkflowRun> {
    const run = await this.client().workflows.cancelRun(this.args.id);
    this.print(showRun(run));
    return run;
  }
}

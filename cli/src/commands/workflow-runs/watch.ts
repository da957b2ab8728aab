import type { WorkflowRun } from '@xfer/shared';
import { progressFlags } from '../../progress/index.js';
import { RunFollowCommand } from '../../resources/workflow-runs.js';
import { workflowRunIdArg } from '../../resources/workflows.js';

export default class Watch extends RunFollowCommand<typeof Watch> {
  static override summary = 'Follow a workflow run until it ends (GET /workflow-runs/:id, GET /transfers/:id).';
  static override description = `Shows on stderr each change of the run's or a step's state, and a running transfer step's progress, like "workflows run --follow"; then prints the final run on stdout. Returns at once for a run that has ended.
Exit code 0 when it completed, 7 when it failed or was cancelled, 6 when the server could not be reached (after retries), 4 when the id is unknown.
Ctrl-C only stops watching (exit 130): the run carries on.`;
  static override examples = [
    '<%= config.bin %> workflow-runs watch 665f1c2e9b1d4a0012345679',
    '<%= config.bin %> workflow-runs watch 665f1c2e9b1d4a0012345679 --quiet --json | jq .error',
  ];
  static override args = workflowRunIdArg;
  static override flags = progressFlags;

  async run(): Promise<WorkflowRun> {
    const client = this.client();
    return this.followToEnd(client, await client.workflows.getRun(this.args.id));
  }
}

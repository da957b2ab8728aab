import type { ListWorkflowRunsQuery, WorkflowRun, WorkflowRunStatus } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { runStatusFlag, workflowId, workflowIdArg, workflowRunColumns } from '../../resources/workflows.js';

export default class Runs extends BaseCommand<typeof Runs> {
  static override summary = "List a workflow's runs (GET /workflows, GET /workflows/:id/runs).";
  static override description = `Newest first, one page by default; --all follows every page. STEPS counts the completed steps; ERROR is why a run failed (its first failed step's error). "workflow-runs get <run id>" shows a run's steps.
Exit code 4 when the workflow (id or name, as for "workflows get") is unknown.`;
  static override examples = [
    '<%= config.bin %> workflows runs 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> workflows runs partner-archive --status running',
    '<%= config.bin %> workflows runs 665f1c2e9b1d4a0012345678 --status failed --all --json | jq -r \'.[] | "\\(.id): \\(.error)"\'',
  ];
  static override args = workflowIdArg;
  static override flags = { ...listFlags, status: runStatusFlag };

  async run(): Promise<WorkflowRun[] | undefined> {
    const client = this.client();
    const workflows = client.workflows;
    const id = await workflowId(client, this.args.id);
    const runs = { list: workflows.runs.bind(workflows, id), all: workflows.allRuns.bind(workflows, id) };
    const query: ListWorkflowRunsQuery = this.flags.status ? { status: this.flags.status as WorkflowRunStatus } : {};
    return printList(runs, this.flags, query, workflowRunColumns, this.listOutput);
  }
}

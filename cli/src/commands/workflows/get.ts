import type { Workflow } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { showWorkflow, workflowId, workflowIdArg } from '../../resources/workflows.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show a workflow (GET /workflows, GET /workflows/:id).';
  static override description = 'Its fields, then its steps in order (with --json, the Workflow with its steps as stored). A name is looked up (GET /workflows) and must name one workflow. Exit code 4 when the id or name is unknown, 2 when several workflows have the name.';
  static override examples = ['<%= config.bin %> workflows get 665f1c2e9b1d4a0012345678', '<%= config.bin %> workflows get nightly-export --json | jq .steps > steps.json'];
  static override args = workflowIdArg;

  async run(): Promise<Workflow> {
    const client = this.client();
    const workflow = await client.workflows.get(await workflowId(client, this.args.id));
    this.print(showWorkflow(workflow));
    return workflow;
  }
}

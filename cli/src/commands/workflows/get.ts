import type { Workflow } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { showWorkflow, workflowIdArg } from '../../resources/workflows.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show a workflow (GET /workflows/:id).';
  static override description = 'Its fields, then its steps in order (with --json, the Workflow with its steps as stored). Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> workflows get 665f1c2e9b1d4a0012345678', '<%= config.bin %> workflows get 665f1c2e9b1d4a0012345678 --json | jq .steps > steps.json'];
  static override args = workflowIdArg;

  async run(): Promise<Workflow> {
    const workflow = await this.client().workflows.get(this.args.id);
    this.print(showWorkflow(workflow));
    return workflow;
  }
}

import type { Workflow } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { showWorkflow, workflowId, workflowIdArg, workflowInput, workflowUpdateFlags } from '../../resources/workflows.js';

export default class Update extends BaseCommand<typeof Update> {
  static override summary = 'Change a workflow (GET /workflows, GET /connections, PUT /workflows/:id).';
  static override description = `Only the fields given change. --steps replaces all the steps (the JSON array of "workflows create"); runs under way keep the steps they started with.
Exit code 2 when --steps is not a JSON array of objects, a field is refused or no flag is given, 4 when the workflow (id or name, as for "workflows get") or a connection name is unknown.`;
  static override examples = [
    '<%= config.bin %> workflows update 665f1c2e9b1d4a0012345678 --on-failure continue',
    '<%= config.bin %> workflows update 665f1c2e9b1d4a0012345678 --steps @steps.json',
    `<%= config.bin %> workflows get 665f1c2e9b1d4a0012345678 --json | jq '.steps += [{"type":"delete_source"}] | .steps' | <%= config.bin %> workflows update 665f1c2e9b1d4a0012345678 --steps -`,
  ];
  static override args = workflowIdArg;
  static override flags = workflowUpdateFlags;

  async run(): Promise<Workflow> {
    const client = this.client();
    const body = await workflowInput(client, this.flags);
    if (Object.keys(body).length === 0) throw usageError(Messages.nothingToUpdate);
    const workflow = await client.workflows.update(await workflowId(client, this.args.id), body);
    this.print(showWorkflow(workflow));
    return workflow;
  }
}

import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { workflowId, workflowIdArg } from '../../resources/workflows.js';

export default class Delete extends BaseCommand<typeof Delete> {
  static override summary = 'Delete a workflow (GET /workflows, DELETE /workflows/:id).';
  static override description = 'Its runs go with it; the transfers they created stay. Exit code 5 while a schedule or watcher runs it or a run of it is under way (the message says which: change that first, or cancel the run), 4 when the id or name is unknown (a name as for "workflows get").';
  static override examples = ['<%= config.bin %> workflows delete 665f1c2e9b1d4a0012345678'];
  static override args = workflowIdArg;

  async run(): Promise<Deleted> {
    const client = this.client();
    const deleted = await client.workflows.delete(await workflowId(client, this.args.id));
    this.print(Messages.deleted('workflow', deleted.id));
    return deleted;
  }
}

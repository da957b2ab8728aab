import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { agentIdArg } from '../../resources/agents.js';

export default class Delete extends BaseCommand<typeof Delete> {
  static override summary = 'Revoke an agent (DELETE /agents/:id).';
  static override description = 'At once: its token stops working, its connection is closed and the transfers it was running fail. Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> agents delete 665f1c2e9b1d4a0012345678'];
  static override args = agentIdArg;

  async run(): Promise<Deleted> {
    const deleted = await this.client().agents.delete(this.args.id);
    this.print(Messages.deleted('agent', deleted.id));
    return deleted;
  }
}

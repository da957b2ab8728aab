import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { connectionIdArg } from '../../resources/connections.js';

export default class Delete extends BaseCommand<typeof Delete> {
  static override summary = 'Delete a connection (DELETE /connections/:id).';
  static override description = 'Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> connections delete 665f1c2e9b1d4a0012345678'];
  static override args = connectionIdArg;

  async run(): Promise<Deleted> {
    const deleted = await this.client().connections.delete(this.args.id);
    this.print(Messages.deleted('connection', deleted.id));
    return deleted;
  }
}

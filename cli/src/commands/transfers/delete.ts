import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { transferIdArg } from '../../resources/transfers.js';

export default class Delete extends BaseCommand<typeof Delete> {
  static override summary = 'Delete a finished transfer job and its per-file results (DELETE /transfers/:id).';
  static override description = 'Only completed, failed or cancelled jobs: exit code 5 while it is queued or in progress (cancel it first), 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> transfers delete 665f1c2e9b1d4a0012345678'];
  static override args = transferIdArg;

  async run(): Promise<Deleted> {
    const deleted = await this.client().transfers.delete(this.args.id);
    this.print(Messages.deleted('transfer', deleted.id));
    return deleted;
  }
}

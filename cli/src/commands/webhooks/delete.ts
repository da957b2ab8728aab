import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { webhookIdArg } from '../../resources/webhooks.js';

export default class Delete extends BaseCommand<typeof Delete> {
  static override summary = 'Delete a webhook (DELETE /webhooks/:id).';
  static override description = 'Pending deliveries are not sent. Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> webhooks delete 665f1c2e9b1d4a0012345678'];
  static override args = webhookIdArg;

  async run(): Promise<Deleted> {
    const deleted = await this.client().webhooks.delete(this.args.id);
    this.print(Messages.deleted('webhook', deleted.id));
    return deleted;
  }
}

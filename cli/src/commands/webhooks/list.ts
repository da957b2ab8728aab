import type { Webhook } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { webhookColumns } from '../../resources/webhooks.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List webhooks (GET /webhooks).';
  static override description = 'One page by default; --all follows every page. The signing secret is never shown. Team plan.';
  static override examples = ['<%= config.bin %> webhooks list', '<%= config.bin %> webhooks list --all --json'];
  static override flags = listFlags;

  async run(): Promise<Webhook[] | undefined> {
    return printList(this.client().webhooks, this.flags, {}, webhookColumns, this.listOutput);
  }
}

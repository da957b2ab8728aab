import type { Webhook } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { table } from '../../output.js';
import { listFlags, listItems } from '../../resources/lists.js';
import { webhookColumns } from '../../resources/webhooks.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List webhooks (GET /webhooks).';
  static override description = 'One page by default; --all follows every page. The signing secret is never shown. Team plan.';
  static override examples = ['<%= config.bin %> webhooks list', '<%= config.bin %> webhooks list --all --json'];
  static override flags = listFlags;

  async run(): Promise<Webhook[]> {
    const items = await listItems(this.client().webhooks, this.flags, {});
    this.print(items.length > 0 ? table(items, webhookColumns) : Messages.empty);
    return items;
  }
}

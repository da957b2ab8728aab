import type { WebhookDelivery, WebhookDeliveryStatus } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { table } from '../../output.js';
import { listFlags, printList } from '../../resources/lists.js';
import { deliveryColumns, deliveryStatusFlag, webhookIdArg } from '../../resources/webhooks.js';

export default class Deliveries extends BaseCommand<typeof Deliveries> {
  static override summary = "List a webhook's deliveries (GET /webhooks/:id/deliveries).";
  static override description = `Newest first, one page by default; --all follows every page. The table's LAST column is the last attempt's HTTP status code, or its error when no answer came; --json has every attempt (attempt_log).
Exit code 4 when the webhook id is unknown.`;
  static override examples = [
    '<%= config.bin %> webhooks deliveries 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> webhooks deliveries 665f1c2e9b1d4a0012345678 --status failed --all --json',
  ];
  static override args = webhookIdArg;
  static override flags = { ...listFlags, status: deliveryStatusFlag };

  async run(): Promise<WebhookDelivery[] | undefined> {
    const webhooks = this.client().webhooks;
    const id = this.args.id;
    const deliveries = { list: webhooks.deliveries.bind(webhooks, id), all: webhooks.allDeliveries.bind(webhooks, id) };
    return printList(deliveries, this.flags, { status: this.flags.status as WebhookDeliveryStatus | undefined }, deliveryColumns, this.listOutput);
  }
}

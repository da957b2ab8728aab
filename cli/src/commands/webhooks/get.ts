import type { Webhook } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { webhookIdArg } from '../../resources/webhooks.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show a webhook (GET /webhooks/:id).';
  static override description = 'The signing secret is never shown. Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> webhooks get 665f1c2e9b1d4a0012345678', '<%= config.bin %> webhooks get 665f1c2e9b1d4a0012345678 --json'];
  static override args = webhookIdArg;

  async run(): Promise<Webhook> {
    const webhook = await this.client().webhooks.get(this.args.id);
    this.print(record(webhook));
    return webhook;
  }
}

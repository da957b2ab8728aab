import type { CreatedWebhook } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { readWebhookSecret, webhookCreateFlags } from '../../resources/webhooks.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = 'Create a webhook (POST /webhooks).';
  static override description = `Events are POSTed to --webhook-url (https, public addresses only: a refused URL is exit code 2 with the server's reason), signed with HMAC-SHA256 (X-Webhook-Signature).
Without --secret-stdin the service generates the signing secret: it is in the answer (secret) and never shown again, and a warning saying so goes to stderr. A secret piped with --secret-stdin is never echoed.`;
  static override examples = [
    '<%= config.bin %> webhooks create --webhook-url https://hooks.example.com/xfer --event transfer.completed --event transfer.failed',
    '<%= config.bin %> webhooks create --webhook-url https://hooks.example.com/xfer --event file.uploaded --json | jq -r .secret',
    'printf %s "$SIGNING_SECRET" | <%= config.bin %> webhooks create --webhook-url https://hooks.example.com/xfer --event file.uploaded --secret-stdin',
  ];
  static override flags = webhookCreateFlags;

  async run(): Promise<CreatedWebhook> {
    const f = this.flags;
    const secret = await readWebhookSecret(f);
    const { data: webhook, warning } = await this.client().webhooks.create({ url: f['webhook-url'], events: f.event, ...(secret && { secret }) });
    this.print(record(webhook));
    if (warning) this.note(warning);
    return webhook;
  }
}

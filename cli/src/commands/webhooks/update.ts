import { Flags } from '@oclif/core';
import type { UpdateWebhookRequest, Webhook } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { readWebhookSecret, webhookIdArg, webhookUpdateFlags } from '../../resources/webhooks.js';

export default class Update extends BaseCommand<typeof Update> {
  static override summary = 'Change a webhook (PUT /webhooks/:id).';
  static override description = `Only the fields given change. --event replaces the whole list of events. --no-active pauses the webhook (it keeps its settings and receives nothing), --active resumes it.
--secret-stdin rotates the signing secret: every attempt from then on, retries included, is signed with the new one. Exit code 4 when the id is unknown.`;
  static override examples = [
    '<%= config.bin %> webhooks update 665f1c2e9b1d4a0012345678 --no-active',
    '<%= config.bin %> webhooks update 665f1c2e9b1d4a0012345678 --event transfer.failed --webhook-url https://hooks.example.com/v2',
    'printf %s "$NEW_SECRET" | <%= config.bin %> webhooks update 665f1c2e9b1d4a0012345678 --secret-stdin',
  ];
  static override args = webhookIdArg;
  static override flags = {
    ...webhookUpdateFlags,
    active: Flags.boolean({ description: 'Deliver events (--no-active: pause)', allowNo: true }),
  };

  async run(): Promise<Webhook> {
    const f = this.flags;
    const secret = await readWebhookSecret(f);
    const body: UpdateWebhookRequest = {
      ...(f['webhook-url'] !== undefined && { url: f['webhook-url'] }),
      ...(f.event !== undefined && { events: f.event }),
      ...(f.active !== undefined && { active: f.active }),
      ...(secret !== undefined && { secret }),
    };
    if (Object.keys(body).length === 0) throw usageError(Messages.nothingToUpdate);
    const webhook = await this.client().webhooks.update(this.args.id, body);
    this.print(record(webhook));
    return webhook;
  }
}

import { Args } from '@oclif/core';
import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';

export default class Revoke extends BaseCommand<typeof Revoke> {
  static override summary = 'Revoke an API key (DELETE /api-keys/:id).';
  static override description = 'The key stops working at once. Exit code 4 when the id is unknown or already revoked.';
  static override examples = ['<%= config.bin %> api-keys revoke 665f1c2e9b1d4a0012345678'];
  static override args = { id: Args.string({ description: 'API key id', required: true }) };

  async run(): Promise<Deleted> {
    const revoked = await this.client().apiKeys.revoke(this.args.id);
    this.print(Messages.deleted('API key', revoked.id));
    return revoked;
  }
}

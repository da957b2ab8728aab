import type { ApiKey } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { table } from '../../output.js';
import { apiKeyColumns } from '../../resources/api-keys.js';
import { listFlags, listItems } from '../../resources/lists.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List active API keys (GET /api-keys).';
  static override description = 'Unrevoked keys, expired ones included; the key itself is never shown again, only key_prefix.';
  static override examples = ['<%= config.bin %> api-keys list', '<%= config.bin %> api-keys list --all --json'];
  static override flags = listFlags;

  async run(): Promise<ApiKey[]> {
    const items = await listItems(this.client().apiKeys, this.flags, {});
    this.print(items.length > 0 ? table(items, apiKeyColumns) : Messages.empty);
    return items;
  }
}

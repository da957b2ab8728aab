import type { ApiKey } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { apiKeyColumns } from '../../resources/api-keys.js';
import { listFlags, printList } from '../../resources/lists.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List active API keys (GET /api-keys).';
  static override description = 'Unrevoked keys, expired ones included; the key itself is never shown again, only key_prefix.';
  static override examples = ['<%= config.bin %> api-keys list', '<%= config.bin %> api-keys list --all --json'];
  static override flags = listFlags;

  async run(): Promise<ApiKey[] | undefined> {
    return printList(this.client().apiKeys, this.flags, {}, apiKeyColumns, this.listOutput);
  }
}

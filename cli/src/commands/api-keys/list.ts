import { Flags } from '@oclif/core';
import type { ApiKey } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { apiKeyColumns } from '../../resources/api-keys.js';
import { listFlags, printList } from '../../resources/lists.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List active API keys (GET /api-keys).';
  static override description = 'Unrevoked keys, expired ones included; the key itself is never shown again, only key_prefix. service_principal names the registered service principal a key acts as; --service-principal lists only its keys.';
  static override examples = ['<%= config.bin %> api-keys list', '<%= config.bin %> api-keys list --all --json', '<%= config.bin %> api-keys list --service-principal ci-client-id'];
  static override flags = {
    ...listFlags,
    'service-principal': Flags.string({ description: 'Only the keys issued for this service principal (its client id)' }),
  };

  async run(): Promise<ApiKey[] | undefined> {
    return printList(this.client().apiKeys, this.flags, { service_principal: this.flags['service-principal'] }, apiKeyColumns, this.listOutput);
  }
}

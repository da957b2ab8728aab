import { Flags } from '@oclif/core';
import { type CreatedApiKey } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = 'Create an API key (POST /api-keys).';
  static override description = 'The full key is in the answer (key) and never shown again. Scopes: docs/api.md; e.g. connections:read, transfers:write.';
  static override examples = [
    '<%= config.bin %> api-keys create --name ci --scope transfers:read --scope transfers:write --expires-in-days 90',
    '<%= config.bin %> api-keys create --name ci --scope connections:read --json | jq -r .key',
    '<%= config.bin %> api-keys create --name deploy --scope transfers:write --service-principal ci-client-id',
  ];
  static override flags = {
    name: Flags.string({ description: 'Name of the key', required: true }),
    scope: Flags.string({ description: 'Scope granted (repeat for several)', required: true, multiple: true }),
    'expires-in-days': Flags.integer({ description: 'Days until the key expires (1-3650); never when absent', min: 1, max: 3650, exclusive: ['expires-at'] }),
    'expires-at': Flags.string({
      description: 'Exact expiry (ISO 8601); a key that itself expires must give one no later than its own',
      exclusive: ['expires-in-days'],
    }),
    'service-principal': Flags.string({
      description: 'Issue the key for this registered service principal (its client id: xfer settings service-principals show); the key acts as it in the audit trail and is revoked when the principal is removed',
    }),
  };

  async run(): Promise<CreatedApiKey> {
    const f = this.flags;
    const { data: key, warning } = await this.client().apiKeys.create({
      name: f.name, scopes: f.scope,
      ...(f['expires-in-days'] !== undefined && { expires_in_days: f['expires-in-days'] }),
      ...(f['expires-at'] !== undefined && { expires_at: f['expires-at'] }),
      ...(f['service-principal'] !== undefined && { service_principal: f['service-principal'] }),
    });
    this.print(record(key));
    if (warning) this.note(warning);
    return key;
  }
}

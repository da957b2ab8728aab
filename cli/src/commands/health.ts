import type { Health as HealthStatus } from '@xfer/shared';
import { BaseCommand, usageError } from '../base-command.js';
import { Messages } from '../messages.js';
import { record } from '../output.js';

export default class Health extends BaseCommand<typeof Health> {
  static override summary = 'Check that the server and its database answer (GET /health).';
  static override description = `Needs no credentials, only the server URL (XFER_URL, --url or the profile's). Exit code 0 when the server answers ok; 6 when it answers 503 (database down) or cannot be reached, after the client's retries.`;
  static override examples = [
    '<%= config.bin %> health --url https://xfer.example.com/api/v1',
    'XFER_URL=https://xfer.example.com/api/v1 <%= config.bin %> health --json',
  ];

  async run(): Promise<HealthStatus> {
    const url = this.resolveUrl();
    if (!url) throw usageError(Messages.noUrl(this.flags.profile));
    const health = await this.client({ url }).health();
    this.print(record({ ...health }));
    return health;
  }
}

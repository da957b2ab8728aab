import type { Connection } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { connectionIdArg } from '../../resources/connections.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show one connection (GET /connections/:id).';
  static override description = 'Credentials are never returned; has_credentials says whether some are stored. Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> connections get 665f1c2e9b1d4a0012345678', '<%= config.bin %> connections get 665f1c2e9b1d4a0012345678 --json'];
  static override args = connectionIdArg;

  async run(): Promise<Connection> {
    const connection = await this.client().connections.get(this.args.id);
    this.print(record(connection));
    return connection;
  }
}

import type { Transfer } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { createRequest, transferSpecFlags } from '../../resources/transfers.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = 'Create a transfer job, without starting it (GET /connections, POST /transfers).';
  static override description = `The job starts queued: start it with "transfers execute", or use "transfers run" to create, start and follow in one go.
--source and --dest take a connection's id or its name (the API takes ids only: a name is looked up with GET /connections). --source-path is a file or a directory, --dest-path a directory; both start with /.
Exit code 4 when a connection is unknown, 2 when a path or option is refused.`;
  static override examples = [
    '<%= config.bin %> transfers create --name nightly --source nas --source-path /exports --dest backups --dest-path /nightly',
    '<%= config.bin %> transfers create --source 665f1c2e9b1d4a0012345678 --source-path /in --dest 665f1c2e9b1d4a0087654321 --dest-path / --overwrite never --json | jq -r .id',
  ];
  static override flags = transferSpecFlags;

  async run(): Promise<Transfer> {
    const client = this.client();
    const transfer = await client.transfers.create(await createRequest(client, this.flags));
    this.print(record(transfer));
    return transfer;
  }
}

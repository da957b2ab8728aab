import type { Transfer } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { transferIdArg } from '../../resources/transfers.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show a transfer job (GET /transfers/:id).';
  static override description = 'Its state, counters (files_total, files_transferred, files_skipped, files_failed, bytes_transferred), options and error. Exit code 4 when the id is unknown.';
  static override examples = [
    '<%= config.bin %> transfers get 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> transfers get 665f1c2e9b1d4a0012345678 --json | jq -r .status',
  ];
  static override args = transferIdArg;

  async run(): Promise<Transfer> {
    const transfer = await this.client().transfers.get(this.args.id);
    this.print(record(transfer));
    return transfer;
  }
}

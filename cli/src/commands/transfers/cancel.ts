import type { Transfer } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { transferIdArg } from '../../resources/transfers.js';

export default class Cancel extends BaseCommand<typeof Cancel> {
  static override summary = 'Cancel a queued or running transfer job (POST /transfers/:id/cancel).';
  static override description = 'The agent of a running job is told to stop and clean up; files already copied stay. Prints the cancelled job. Exit code 5 when the job has already finished, 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> transfers cancel 665f1c2e9b1d4a0012345678'];
  static override args = transferIdArg;

  async run(): Promise<Transfer> {
    const transfer = await this.client().transfers.cancel(this.args.id);
    this.print(record(transfer));
    return transfer;
  }
}

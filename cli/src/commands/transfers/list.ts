import type { Transfer, TransferStatus } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { transferColumns, transferStatusFlag } from '../../resources/transfers.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List transfer jobs (GET /transfers).';
  static override description = 'Newest first, one page by default; --all follows every page. FILES counts transferred and skipped files out of those found so far. With --json, prints the array of jobs exactly as the API returns them.';
  static override examples = [
    '<%= config.bin %> transfers list',
    '<%= config.bin %> transfers list --status failed --all --json | jq -r \'.[].id\'',
  ];
  static override flags = { ...listFlags, status: transferStatusFlag };

  async run(): Promise<Transfer[] | undefined> {
    return printList(this.client().transfers, this.flags, { status: this.flags.status as TransferStatus | undefined }, transferColumns, this.listOutput);
  }
}

import { Flags } from '@oclif/core';
import type { TransferFile } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { transferFileColumns, transferFileStatusFlag, transferIdArg } from '../../resources/transfers.js';

export default class Files extends BaseCommand<typeof Files> {
  static override summary = "List a transfer job's per-file results (GET /transfers/:id/files).";
  static override description = 'One row per file and run (attempt), newest first; paths are relative to the source path. One page by default; --all follows every page. Exit code 4 when the id is unknown.';
  static override examples = [
    '<%= config.bin %> transfers files 665f1c2e9b1d4a0012345678 --status failed',
    '<%= config.bin %> transfers files 665f1c2e9b1d4a0012345678 --all --json | jq -r \'.[] | select(.status == "copied") | .path\'',
  ];
  static override args = transferIdArg;
  static override flags = {
    ...listFlags,
    status: transferFileStatusFlag,
    attempt: Flags.integer({ description: 'Only the results of this run (1, then one more per retry)', min: 1 }),
  };

  async run(): Promise<TransferFile[] | undefined> {
    const { status, attempt } = this.flags;
    const transfers = this.client().transfers;
    const id = this.args.id;
    // printList wants a resource of one argument: bind the job's id.
    const resource = { list: transfers.files.bind(transfers, id), all: transfers.allFiles.bind(transfers, id) };
    return printList(resource, this.flags, { status: status as TransferFile['status'] | undefined, attempt }, transferFileColumns, this.listOutput);
  }
}

import { Flags } from '@oclif/core';
import type { ShareLink } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { shareColumns } from '../../resources/shares.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List share links (GET /shares, GET /files/:id/shares).';
  static override description = `Every link of the account, those of deleted files included; with --file, one live file's links (exit code 4 when it is unknown or deleted). Never the tokens.
status is active, revoked, file_deleted, expired or exhausted; newest first, one page by default, --all follows every page.`;
  static override examples = [
    '<%= config.bin %> shares list',
    '<%= config.bin %> shares list --file 665f1c2e9b1d4a0012345678 --all --json | jq -r \'.[] | select(.status == "active") | .id\'',
  ];
  static override flags = { ...listFlags, file: Flags.string({ description: 'Only the links of this file id' }) };

  async run(): Promise<ShareLink[] | undefined> {
    const shares = this.client().shares;
    const file = this.flags.file;
    const source = file === undefined ? shares
      : { list: (q: object) => shares.listForFile(file, q), all: (q: object) => shares.allForFile(file, q) };
    return printList(source, this.flags, {}, shareColumns, this.listOutput);
  }
}

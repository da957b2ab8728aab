import { Flags } from '@oclif/core';
import type { FileRecord } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { fileColumns } from '../../resources/files.js';
import { listFlags, printList } from '../../resources/lists.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List the files of a folder (GET /files).';
  static override description = 'The files directly in --path (default /), or in its whole subtree with --recursive; newest first, one page by default, --all follows every page. With --json, the array of file records as the API returns them.';
  static override examples = [
    '<%= config.bin %> files list --path /reports',
    '<%= config.bin %> files list --path /backups --recursive --all --json | jq -r \'.[] | "\\(.sha256)  \\(.path)/\\(.name)"\'',
  ];
  static override flags = {
    ...listFlags,
    path: Flags.string({ description: 'Folder, e.g. /reports (default /)' }),
    recursive: Flags.boolean({ char: 'r', description: 'Include every folder below --path' }),
  };

  async run(): Promise<FileRecord[] | undefined> {
    const f = this.flags;
    return printList(this.client().files, f, { path: f.path, ...(f.recursive && { recursive: true }) }, fileColumns, this.listOutput);
  }
}

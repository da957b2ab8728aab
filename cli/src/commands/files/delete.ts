import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { fileIdArg } from '../../resources/files.js';

export default class Delete extends BaseCommand<typeof Delete> {
  static override summary = 'Delete a file (DELETE /files/:id).';
  static override description = 'The file disappears from lists, search and downloads, and its share links stop working (410); the service keeps the record for its audit trail. Exit code 4 when the id is unknown or already deleted.';
  static override examples = ['<%= config.bin %> files delete 665f1c2e9b1d4a0012345678'];
  static override args = fileIdArg;

  async run(): Promise<Deleted> {
    const deleted = await this.client().files.delete(this.args.id);
    this.print(Messages.deleted('file', deleted.id));
    return deleted;
  }
}

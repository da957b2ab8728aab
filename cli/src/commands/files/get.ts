import type { FileRecord } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { fileIdArg } from '../../resources/files.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show a file (GET /files/:id).';
  static override description = 'Its folder, name, size in bytes, MIME type, SHA-256 and who uploaded it. Exit code 4 when the id is unknown or the file deleted.';
  static override examples = ['<%= config.bin %> files get 665f1c2e9b1d4a0012345678', '<%= config.bin %> files get 665f1c2e9b1d4a0012345678 --json | jq -r .sha256'];
  static override args = fileIdArg;

  async run(): Promise<FileRecord> {
    const file = await this.client().files.get(this.args.id);
    this.print(record(file));
    return file;
  }
}

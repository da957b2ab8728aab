import { Args, Flags } from '@oclif/core';
import type { FileRecord } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { progressFlags } from '../../progress/index.js';
import { uploadLocalFile } from '../../resources/files.js';

export default class Upload extends BaseCommand<typeof Upload> {
  static override summary = 'Upload a file to the file store (POST /files/upload).';
  static override description = `The file streams to the server as it is read (never held in memory) and is scanned for malware before it is kept. A name already in the folder is kept as a second file with its own id.
- reads stdin, then --name is required.
Progress goes to stderr: a live view on a terminal, a line every 5 s otherwise (XFER_PROGRESS_INTERVAL_MS), none with --quiet or with --json in a pipe.
Exit code 2 when the server refuses the content (422 malware found: "File rejected: malware detected (…)"; 413 above the size limit) or the path or name; 6 when the malware scanner or the store is unavailable (503; an upload is never retried, run it again).`;
  static override examples = [
    '<%= config.bin %> files upload report.pdf --path /reports/2026',
    'tar c logs | <%= config.bin %> files upload - --name logs.tar --path /backups --json | jq -r .id',
  ];
  static override args = { 'local-path': Args.string({ description: 'File to upload, or - for stdin', required: true }) };
  static override flags = {
    path: Flags.string({ description: 'Folder in the file store, e.g. /reports/2026 (default /)' }),
    name: Flags.string({ description: 'Name to store the file under (default: the local file name)' }),
    ...progressFlags,
  };

  async run(): Promise<FileRecord> {
    // The client is made once the local file is known to be there (a usage error comes first).
    const file = await uploadLocalFile(this.args['local-path'], { name: this.flags.name, json: this.jsonEnabled(), quiet: this.flags.quiet },
      (source, settings) => this.client().files.upload({ ...source, path: this.flags.path }, settings));
    this.print(record(file));
    return file;
  }
}

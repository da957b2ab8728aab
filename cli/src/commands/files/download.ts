import { BaseCommand } from '../../base-command.js';
import { downloadFlags, downloadRequest, fileIdArg, saveDownload, savedLine, type SavedFile } from '../../resources/files.js';

export default class Download extends BaseCommand<typeof Download> {
  static override summary = 'Download a file (GET /files/:id/download, GET /files/:id).';
  static override description = `Writes to <output>.xfer-part and renames it to the output once complete and its SHA-256 equals the server's (the ETag), so the output path never holds a partial or corrupt file; on failure the partial file is deleted, unless --continue keeps it to resume from. --continue sends a Range request from the partial file's size and verifies the whole result.
An existing output file is left alone (exit 2) unless --force. With --output -, the content goes to stdout (progress stays on stderr; --json is refused).
With --json, {file, name, size, sha256, resumed_from} of what was written.
Exit code 4 when the id is unknown or the file deleted, 1 when the content does not match its SHA-256, 130 on Ctrl-C.`;
  static override examples = [
    '<%= config.bin %> files download 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> files download 665f1c2e9b1d4a0012345678 -o backup.tar --continue',
    '<%= config.bin %> files download 665f1c2e9b1d4a0012345678 -o - | tar x',
  ];
  static override args = fileIdArg;
  static override flags = downloadFlags;

  async run(): Promise<SavedFile> {
    const files = this.client().files;
    const id = this.args.id;
    const saved = await saveDownload(downloadRequest(this.flags, this.jsonEnabled(),
      (range, signal) => files.download(id, { range, signal }),
      async () => (await files.get(id)).name));
    if (saved.file) this.print(savedLine(saved));
    return saved;
  }
}

import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { Args, Flags } from '@oclif/core';
import type { FileRecord } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { progressFlags, progressMode } from '../../progress/index.js';
import { byteProgress, tapped } from '../../resources/files.js';

/**
 * The client's limit on silence, per chunk sent and then for the answer. After the last byte the
 * server still waits for clamd's verdict (XFER_CLAMD_TIMEOUT_MS, 120 s by default) and commits
 * the content: the client's default 60 s would report a timeout for an upload the server keeps.
 */
const UPLOAD_TIMEOUT_MS = 300_000;

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
    const local = this.args['local-path'];
    const fromStdin = local === '-';
    if (fromStdin && !this.flags.name) throw usageError(Messages.stdinNeedsName);
    let size: number | undefined;
    if (!fromStdin) {
      const info = await stat(local).catch(() => undefined);
      if (!info) throw usageError(Messages.noLocalFile(local));
      if (!info.isFile()) throw usageError(Messages.notAFile(local));
      size = info.size;
    }
    const name = this.flags.name ?? basename(local);
    const client = this.client();
    const source = fromStdin ? process.stdin : createReadStream(local);
    const progress = await byteProgress(progressMode({ json: this.jsonEnabled(), quiet: this.flags.quiet }), { label: name, state: 'uploading', bytes: 0, bytesTotal: size });
    try {
      async function* content() {
        yield* tapped(source, (chunk) => progress.add(chunk.length));
        // Every byte is sent: what remains is the server's malware scan.
        progress.set({ state: 'scanning' });
      }
      const file = await client.files.upload({ name, path: this.flags.path, size, content: content() }, { timeoutMs: UPLOAD_TIMEOUT_MS });
      progress.set({ state: 'uploaded' });
      this.print(record(file));
      return file;
    } catch (err) {
      progress.set({ state: 'failed' });
      throw err;
    } finally {
      progress.stop();
      if (!fromStdin) source.destroy();
    }
  }
}

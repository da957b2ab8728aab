import { Args } from '@oclif/core';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { downloadFlags, downloadRequest, saveDownload, savedLine, type SavedFile } from '../../resources/files.js';

export default class Download extends BaseCommand<typeof Download> {
  static override summary = 'Download a shared file, without an account (GET /files/shared/:token).';
  static override description = `Needs no login or API key: only the server URL (XFER_URL, --url or the profile's) for a token or a relative url, nothing at all for an absolute URL.
Same output rules as "files download": written to <output>.xfer-part and renamed once complete and its SHA-256 verified, an existing file kept unless --force, - for stdout. --continue needs --output (the stored name is known only once a download starts). Every request counts against the link's --max-downloads, a resumed one too.
Exit code 4 when the link is unknown, or 410: revoked, expired, used up or its file deleted (the server's reason is the error line).`;
  static override examples = [
    '<%= config.bin %> shares download https://xfer.example.com/api/v1/files/shared/3q2-7wE…',
    '<%= config.bin %> shares download 3q2-7wE… --url https://xfer.example.com/api/v1 -o report.pdf',
  ];
  static override args = { link: Args.string({ description: 'The token, the url of "shares create" (/api/v1/files/shared/…) or an absolute URL', required: true }) };
  static override flags = downloadFlags;

  async run(): Promise<SavedFile> {
    const link = this.args.link;
    const url = /^https?:\/\//i.test(link) ? link : this.resolveUrl();
    if (!url) throw usageError(Messages.noUrl(this.flags.profile));
    const shares = this.client({ url }).shares;
    const saved = await saveDownload(downloadRequest(this.flags, this.jsonEnabled(), (range, signal) => shares.download(link, { range, signal })));
    if (saved.file) this.print(savedLine(saved));
    return saved;
  }
}

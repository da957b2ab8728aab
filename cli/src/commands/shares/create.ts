import { Flags } from '@oclif/core';
import { SHARE_MAX_DOWNLOADS, SHARE_MAX_EXPIRES_IN_HOURS, type CreatedShareLink } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { fileIdArg } from '../../resources/shares.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = 'Create a share link to a file (POST /files/:id/share).';
  static override description = `Anyone with the link downloads the file without an account or key ("shares download", a browser, curl) until it expires, reaches --max-downloads or is revoked.
The token and url are in this answer only (lists never show them). The human output shows the absolute URL; --json prints the API's data as is, where url is relative to the server's origin ("shares download" takes the token, that url or an absolute one).
Exit code 4 when the file id is unknown or the file deleted.`;
  static override examples = [
    '<%= config.bin %> shares create 665f1c2e9b1d4a0012345678 --expires-in-hours 72 --max-downloads 3',
    'token=$(<%= config.bin %> shares create 665f1c2e9b1d4a0012345678 --json | jq -r .token)',
  ];
  static override args = fileIdArg;
  static override flags = {
    'expires-in-hours': Flags.integer({ description: `Hours until the link expires (1-${SHARE_MAX_EXPIRES_IN_HOURS}, default 24)`, min: 1, max: SHARE_MAX_EXPIRES_IN_HOURS }),
    'max-downloads': Flags.integer({ description: `Downloads allowed (1-${SHARE_MAX_DOWNLOADS}); unlimited when absent. A resumed download (Range) counts as one more`, min: 1, max: SHARE_MAX_DOWNLOADS }),
  };

  async run(): Promise<CreatedShareLink> {
    const f = this.flags;
    const client = this.client();
    const link = await client.shares.create(this.args['file-id'], {
      ...(f['expires-in-hours'] !== undefined && { expires_in_hours: f['expires-in-hours'] }),
      ...(f['max-downloads'] !== undefined && { max_downloads: f['max-downloads'] }),
    });
    this.print(record({ ...link, url: client.shares.sharedUrl(link.url) }));
    this.note(Messages.shareShownOnce);
    return link;
  }
}

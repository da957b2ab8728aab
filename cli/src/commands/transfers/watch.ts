import type { Transfer } from '@xfer/shared';
import { progressFlags } from '../../progress/index.js';
import { FollowCommand, transferIdArg } from '../../resources/transfers.js';

export default class Watch extends FollowCommand<typeof Watch> {
  static override summary = 'Follow a transfer job until it ends (GET /transfers/:id).';
  static override description = `Shows its progress on stderr like "transfers run", then prints the final job on stdout. Returns at once for a finished job. A queued job is waited for until someone starts it.
Exit code 0 when it completed, 7 when it failed or was cancelled, 6 when the server could not be reached (after retries), 4 when the id is unknown.
Ctrl-C only stops watching (exit 130): the job carries on.`;
  static override examples = [
    '<%= config.bin %> transfers watch 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> transfers watch 665f1c2e9b1d4a0012345678 --quiet --json | jq .files_failed',
  ];
  static override args = transferIdArg;
  static override flags = progressFlags;

  async run(): Promise<Transfer> {
    const client = this.client();
    return this.followToEnd(client, await client.transfers.get(this.args.id), false);
  }
}

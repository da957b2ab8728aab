import type { UpdateWatcherRequest, Watcher } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { actionInput, givesAction, givesTransfer, watcherIdArg, watcherUpdateFlags, watchingInput } from '../../resources/watchers.js';

export default class Update extends BaseCommand<typeof Update> {
  static override summary = 'Change a watcher (GET /watchers/:id, PUT /watchers/:id).';
  static override description = `Only the fields given change. A new --connection, --path, --pattern, --recursive, --stable or --include-existing makes the agent start the watcher over (files modified since shortly before its last poll count as new); --active after a pause acts on the files that arrived meanwhile.
The action is replaced whole: the API takes it as one field. The transfer flags (--dest, --dest-path, --overwrite, --verify, --concurrency) change only what they name: the watcher's transfer is read first and sent back whole with them applied. --workflow replaces the transfer with a workflow.
Exit code 2 when a field is refused or no flag is given, 4 when the id or a connection name is unknown.`;
  static override examples = [
    '<%= config.bin %> watchers update 665f1c2e9b1d4a0012345678 --no-active',
    '<%= config.bin %> watchers update 665f1c2e9b1d4a0012345678 --pattern "*.xml" --poll-interval 300',
    '<%= config.bin %> watchers update 665f1c2e9b1d4a0012345678 --dest-path "/archive/{{date:YYYY}}/{{run.id}}"',
  ];
  static override args = watcherIdArg;
  static override flags = watcherUpdateFlags;

  async run(): Promise<Watcher> {
    const client = this.client();
    const f = this.flags;
    const body: UpdateWatcherRequest = await watchingInput(client, f);
    if (givesAction(f)) {
      const current = givesTransfer(f) ? (await client.watchers.get(this.args.id)).action.transfer : null;
      body.action = await actionInput(client, f, current);
    }
    if (Object.keys(body).length === 0) throw usageError(Messages.nothingToUpdate);
    const watcher = await client.watchers.update(this.args.id, body);
    this.print(record(watcher));
    return watcher;
  }
}

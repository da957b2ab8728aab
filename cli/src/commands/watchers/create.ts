import type { Watcher } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { actionInput, watcherCreateFlags, watchingInput } from '../../resources/watchers.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = 'Create a watcher that acts on each new file in a folder (GET /connections, POST /watchers).';
  static override description = `The agent serving --connection lists --path every --poll-interval seconds; a file whose name matches --pattern and that has not changed for --stable seconds is acted on once per version (a changed file again).
The action is a transfer of the file into the directory --dest-path on --dest (with the transfer options given), or --workflow. --dest-path is a template: {{file.name}} and {{file.path}} (the file found), {{params.NAME}}, {{date:YYYY-MM-DD}} (when the file was seen, UTC) and {{run.id}}; quote it for the shell.
Files already in the folder are left alone unless --include-existing. --no-active creates it paused.
Exit code 2 when a field is refused (the server's message names it), 4 when a connection name is unknown.`;
  static override examples = [
    '<%= config.bin %> watchers create --name partner-inbox --connection partner-sftp --path /inbox --pattern "*.csv" --dest archive-s3 --dest-path "/partner/{{date:YYYY-MM-DD}}"',
    '<%= config.bin %> watchers create --name drops --connection nas --path /drop --recursive --poll-interval 30 --stable 60 --dest backups --dest-path "/drops/{{run.id}}" --verify size --json | jq -r .id',
  ];
  static override flags = watcherCreateFlags;

  async run(): Promise<Watcher> {
    const client = this.client();
    const f = this.flags;
    // --connection is required, so the fields given hold its id.
    const fields = await watchingInput(client, f);
    const watcher = await client.watchers.create({ ...fields, name: f.name, connectionId: fields.connectionId!, path: f.path, action: await actionInput(client, f) });
    this.print(record(watcher));
    return watcher;
  }
}

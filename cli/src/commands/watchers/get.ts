import type { Watcher } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { watcherIdArg } from '../../resources/watchers.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show a watcher (GET /watchers/:id).';
  static override description = `With the agent polling it (agent_id, none while no agent that may serve its connection is online), when its last good poll started (last_poll_at) and why the last one failed (last_error).
Exit code 4 when the id is unknown.`;
  static override examples = ['<%= config.bin %> watchers get 665f1c2e9b1d4a0012345678', '<%= config.bin %> watchers get 665f1c2e9b1d4a0012345678 --json | jq .action'];
  static override args = watcherIdArg;

  async run(): Promise<Watcher> {
    const watcher = await this.client().watchers.get(this.args.id);
    this.print(record(watcher));
    return watcher;
  }
}

import type { WatcherEvent } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { watcherEventColumns, watcherIdArg } from '../../resources/watchers.js';

export default class Events extends BaseCommand<typeof Events> {
  static override summary = "List the file versions a watcher acted on (GET /watchers/:id/events).";
  static override description = `Newest first, one page by default; --all follows every page. STATUS is the action's: its transfer's (or workflow run's) status as it is now, pending before it started, failed when no transfer could be made (ERROR says why), unknown once the transfer was deleted.
Exit code 4 when the watcher id is unknown.`;
  static override examples = [
    '<%= config.bin %> watchers events 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> watchers events 665f1c2e9b1d4a0012345678 --all --json | jq -r \'.[] | select(.action_status == "failed") | "\\(.path): \\(.error)"\'',
  ];
  static override args = watcherIdArg;
  static override flags = listFlags;

  async run(): Promise<WatcherEvent[] | undefined> {
    const watchers = this.client().watchers;
    const id = this.args.id;
    const events = { list: watchers.events.bind(watchers, id), all: watchers.allEvents.bind(watchers, id) };
    return printList(events, this.flags, {}, watcherEventColumns, this.listOutput);
  }
}

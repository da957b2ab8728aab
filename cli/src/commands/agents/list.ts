import type { Agent } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { agentColumns } from '../../resources/agents.js';
import { listFlags, printList } from '../../resources/lists.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List agents (GET /agents).';
  static override description = 'One page by default; --all follows every page. STATUS is online while the agent holds a live connection; RUNNING_JOBS counts the transfers it is running (--json lists their ids). The API has no filters beyond paging: filter --json with jq.';
  static override examples = ['<%= config.bin %> agents list', `<%= config.bin %> agents list --all --json | jq -r '.[] | select(.status == "offline") | .name'`];
  static override flags = listFlags;

  async run(): Promise<Agent[] | undefined> {
    return printList(this.client().agents, this.flags, {}, agentColumns, this.listOutput);
  }
}

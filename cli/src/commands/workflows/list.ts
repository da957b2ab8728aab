import type { Workflow } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { workflowColumns } from '../../resources/workflows.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List workflows (GET /workflows).';
  static override description = 'Newest first, one page by default; --all follows every page. STEPS lists the types of the steps in order.';
  static override examples = ['<%= config.bin %> workflows list', '<%= config.bin %> workflows list --all --json'];
  static override flags = listFlags;

  async run(): Promise<Workflow[] | undefined> {
    return printList(this.client().workflows, this.flags, {}, workflowColumns, this.listOutput);
  }
}

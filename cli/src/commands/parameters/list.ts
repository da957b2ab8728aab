import type { Parameter } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { listFlags, printList } from '../../resources/lists.js';
import { parameterColumns } from '../../resources/parameters.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List global parameters (GET /parameters).';
  static override description = 'One page by default; --all follows every page. A secret parameter\'s value is never shown (value null, has_value true).';
  static override examples = ['<%= config.bin %> parameters list', '<%= config.bin %> parameters list --all --json'];
  static override flags = listFlags;

  async run(): Promise<Parameter[] | undefined> {
    return printList(this.client().parameters, this.flags, {}, parameterColumns, this.listOutput);
  }
}

import { Flags } from '@oclif/core';
import { CONNECTION_TYPES, type Connection, type ConnectionType } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { connectionColumns } from '../../resources/connections.js';
import { listFlags, printList } from '../../resources/lists.js';

export default class List extends BaseCommand<typeof List> {
  static override summary = 'List connections (GET /connections).';
  static override description = 'Newest first, one page by default; --all follows every page. With --json, prints the array of connections exactly as the API returns them.';
  static override examples = ['<%= config.bin %> connections list', '<%= config.bin %> connections list --type sftp --all --json'];
  static override flags = { ...listFlags, type: Flags.string({ description: 'Only connections of this type', options: [...CONNECTION_TYPES] }) };

  async run(): Promise<Connection[] | undefined> {
    return printList(this.client().connections, this.flags, { type: this.flags.type as ConnectionType | undefined }, connectionColumns, this.listOutput);
  }
}

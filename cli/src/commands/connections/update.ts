import { Flags } from '@oclif/core';
import type { Connection, UpdateConnectionRequest } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { connectionFieldFlags, connectionFields, connectionIdArg } from '../../resources/connections.js';

const CLEARABLE = ['host', 'port', 'agent_id', 'agent_pool'] as const;

export default class Update extends BaseCommand<typeof Update> {
  static override summary = 'Change a connection (PUT /connections/:id).';
  static override description = `Only the fields given change. Credentials and options, when given, replace the stored ones entirely; changing --type needs new credentials. --clear host|port|agent_id|agent_pool sends null (port goes back to the type's default). A connection is served by one agent (--agent-id) or one pool (--agent-pool): to switch, clear the other in the same command.
Exit code 5 when the name is taken or a concurrent update won.`;
  static override examples = [
    '<%= config.bin %> connections update 665f1c2e9b1d4a0012345678 --name nightly-backups',
    '<%= config.bin %> connections update 665f1c2e9b1d4a0012345678 --credentials-file new-keys.json --clear agent_id',
    '<%= config.bin %> connections update 665f1c2e9b1d4a0012345678 --credentials-file keys.json --agent-pool dc-fra1 --clear agent_id',
  ];
  static override args = connectionIdArg;
  static override flags = {
    ...connectionFieldFlags,
    name: Flags.string({ description: 'New unique name' }),
    clear: Flags.string({ description: 'Field to clear (send null)', options: [...CLEARABLE], multiple: true }),
  };

  async run(): Promise<Connection> {
    const f = this.flags;
    const body: UpdateConnectionRequest = { ...(f.name !== undefined && { name: f.name }), ...await connectionFields(f) };
    for (const field of f.clear ?? []) (body as Record<string, unknown>)[field] = null;
    if (Object.keys(body).length === 0) throw usageError(Messages.nothingToUpdate);
    const connection = await this.client().connections.update(this.args.id, body);
    this.print(record(connection));
    return connection;
  }
}

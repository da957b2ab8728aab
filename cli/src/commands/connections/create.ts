import { Flags } from '@oclif/core';
import { CONNECTION_TYPES, type Connection, type ConnectionType, type CreateConnectionRequest } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { connectionFieldFlags, connectionFields } from '../../resources/connections.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = 'Create a connection (POST /connections).';
  static override description = `Credentials are read as a JSON object from a file or stdin, never from a flag, so secrets stay out of shell history and process lists. Which fields each type needs: docs/api.md "Connections".
Exit code 5 when the name is taken.`;
  static override examples = [
    '<%= config.bin %> connections create --name backups --type s3 --path /my-bucket --credentials-file s3.json',
    `printf '{"username":"u","password":"%s"}' "$SFTP_PASSWORD" | <%= config.bin %> connections create --name nas --type sftp --host nas.lan --credentials-stdin --json`,
  ];
  static override flags = {
    ...connectionFieldFlags,
    name: Flags.string({ description: 'Unique name', required: true }),
    type: Flags.string({ description: 'Storage type', options: [...CONNECTION_TYPES], required: true }),
  };

  async run(): Promise<Connection> {
    const body: CreateConnectionRequest = { ...await connectionFields(this.flags), name: this.flags.name, type: this.flags.type as ConnectionType };
    const connection = await this.client().connections.create(body);
    this.print(record(connection));
    return connection;
  }
}

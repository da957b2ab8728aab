import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { parameterId, parameterIdArg } from '../../resources/parameters.js';

export default class Delete extends BaseCommand<typeof Delete> {
  static override summary = 'Delete a global parameter (GET /parameters, DELETE /parameters/:id).';
  static override description = 'Transfers already created keep their paths; a schedule whose paths name it fails its next run, naming it. The parameter is given by id or name (looked up with GET /parameters?name=). Exit code 4 when it is unknown.';
  static override examples = ['<%= config.bin %> parameters delete 665f1c2e9b1d4a0012345678'];
  static override args = parameterIdArg;

  async run(): Promise<Deleted> {
    const client = this.client();
    const deleted = await client.parameters.delete(await parameterId(client, this.args.id));
    this.print(Messages.deleted('parameter', deleted.id));
    return deleted;
  }
}

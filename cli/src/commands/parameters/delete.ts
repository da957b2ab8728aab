import type { Deleted } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { parameterIdArg } from '../../resources/parameters.js';

export default class Delete extends BaseCommand<typeof Delete> {
  static override summary = 'Delete a global parameter (DELETE /parameters/:id).';
  static override description = 'Transfers already created keep their paths; a schedule whose paths name it fails its next run, naming it. Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> parameters delete 665f1c2e9b1d4a0012345678'];
  static override args = parameterIdArg;

  async run(): Promise<Deleted> {
    const deleted = await this.client().parameters.delete(this.args.id);
    this.print(Messages.deleted('parameter', deleted.id));
    return deleted;
  }
}

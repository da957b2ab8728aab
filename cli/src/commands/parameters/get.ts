import type { Parameter } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { parameterIdArg } from '../../resources/parameters.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show a global parameter (GET /parameters/:id).';
  static override description = 'A secret parameter\'s value is never shown. Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> parameters get 665f1c2e9b1d4a0012345678', '<%= config.bin %> parameters get 665f1c2e9b1d4a0012345678 --json'];
  static override args = parameterIdArg;

  async run(): Promise<Parameter> {
    const parameter = await this.client().parameters.get(this.args.id);
    this.print(record(parameter));
    return parameter;
  }
}

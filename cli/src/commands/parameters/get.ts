import type { Parameter } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { parameterId, parameterIdArg } from '../../resources/parameters.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show a global parameter (GET /parameters, GET /parameters/:id).';
  static override description = 'A secret parameter\'s value is never shown. The parameter is given by id or name (looked up with GET /parameters?name=). Exit code 4 when it is unknown.';
  static override examples = ['<%= config.bin %> parameters get region', '<%= config.bin %> parameters get 665f1c2e9b1d4a0012345678 --json'];
  static override args = parameterIdArg;

  async run(): Promise<Parameter> {
    const client = this.client();
    const parameter = await client.parameters.get(await parameterId(client, this.args.id));
    this.print(record(parameter));
    return parameter;
  }
}

import { Flags } from '@oclif/core';
import type { Parameter, UpdateParameterRequest } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { parameterFlags, parameterId, parameterIdArg, readParameterValue } from '../../resources/parameters.js';

export default class Update extends BaseCommand<typeof Update> {
  static override summary = 'Change a global parameter (GET /parameters, PUT /parameters/:id).';
  static override description = `Only the fields given change. --secret encrypts the stored value; --no-secret makes a secret parameter plain again and needs a new value (the secret one is never revealed).
Transfers already created keep the paths they were rendered with. The parameter is given by id or name (looked up with GET /parameters?name=). Exit code 4 when it is unknown, 5 when the new name is taken.`;
  static override examples = [
    '<%= config.bin %> parameters update region --value us-east',
    'printf %s "$NEW_TOKEN" | <%= config.bin %> parameters update 665f1c2e9b1d4a0012345678 --value-stdin',
  ];
  static override args = parameterIdArg;
  static override flags = {
    ...parameterFlags,
    secret: Flags.boolean({ description: 'Encrypt the value (--no-secret: make it plain, with a new value)', allowNo: true }),
  };

  async run(): Promise<Parameter> {
    const f = this.flags;
    // Without --secret the parameter may still be secret: a value on the command line is refused
    // only when the caller says so or turns it secret; the server never echoes a secret value.
    const value = await readParameterValue(f, f.secret === true, false);
    const body: UpdateParameterRequest = {
      ...(f.name !== undefined && { name: f.name }),
      ...(value !== undefined && { value }),
      ...(f.secret !== undefined && { secret: f.secret }),
      ...(f.description !== undefined && { description: f.description }),
    };
    if (Object.keys(body).length === 0) throw usageError(Messages.nothingToUpdate);
    const client = this.client();
    const parameter = await client.parameters.update(await parameterId(client, this.args.id), body);
    this.print(record(parameter));
    return parameter;
  }
}

import { Flags } from '@oclif/core';
import type { Parameter } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { parameterCreateFlags, readParameterValue } from '../../resources/parameters.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = 'Create a global parameter (POST /parameters).';
  static override description = `Paths of transfers (and schedules) insert it with {{params.NAME}}. Names are unique in the account: a taken one is exit code 5.
--secret stores the value encrypted; it is never shown again and cannot be used in paths. A secret value is piped with --value-stdin (or asked for on a terminal), never given with --value.`;
  static override examples = [
    '<%= config.bin %> parameters create --name region --value eu-west --description "Where reports land"',
    'printf %s "$PARTNER_TOKEN" | <%= config.bin %> parameters create --name partner_token --secret --value-stdin --json',
  ];
  static override flags = {
    ...parameterCreateFlags,
    secret: Flags.boolean({ description: 'Store the value encrypted and never show it' }),
  };

  async run(): Promise<Parameter> {
    const f = this.flags;
    const value = (await readParameterValue(f, f.secret, true))!;
    const parameter = await this.client().parameters.create({
      name: f.name, value, secret: f.secret, ...(f.description !== undefined && { description: f.description }),
    });
    this.print(record(parameter));
    return parameter;
  }
}

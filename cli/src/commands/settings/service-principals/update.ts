import { Flags } from '@oclif/core';
import type { ServicePrincipalsSetting } from '@xfer/shared';
import { BaseCommand, usageError } from '../../../base-command.js';
import { Messages } from '../../../messages.js';
import { table } from '../../../output.js';
import { CONSOLE_ONLY, parseServicePrincipal, servicePrincipalColumns } from '../../../resources/settings.js';

export default class Update extends BaseCommand<typeof Update> {
  static override summary = "Replace the account's service principals (PUT /settings/service-principals).";
  static override description = `The list given replaces the whole list: repeat --principal NAME=CLIENT_ID for each one to keep, or --clear for none. Names and client ids must be unique (exit code 2 otherwise). Owners and admins only (exit code 3 otherwise). ${CONSOLE_ONLY}`;
  static override examples = [
    '<%= config.bin %> settings service-principals update --principal "Nightly ETL=0oa1b2c3d4" --principal "Backup=9f8e7d6c"',
    '<%= config.bin %> settings service-principals update --clear',
  ];
  static override flags = {
    principal: Flags.string({ description: 'A service principal as NAME=CLIENT_ID (repeat for several)', multiple: true, exclusive: ['clear'] }),
    clear: Flags.boolean({ description: 'Remove every service principal', exclusive: ['principal'] }),
  };

  async run(): Promise<ServicePrincipalsSetting> {
    const { principal, clear } = this.flags;
    if (!principal && !clear) throw usageError(Messages.nothingToUpdate);
    const setting = await this.client().settings.updateServicePrincipals({ service_principals: (principal ?? []).map(parseServicePrincipal) });
    const list = setting.service_principals;
    this.print(list.length > 0 ? table(list, servicePrincipalColumns) : Messages.empty);
    return setting;
  }
}

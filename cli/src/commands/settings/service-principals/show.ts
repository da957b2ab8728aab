import type { ServicePrincipalsSetting } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { Messages } from '../../../messages.js';
import { table } from '../../../output.js';
import { CONSOLE_ONLY, servicePrincipalColumns } from '../../../resources/settings.js';

export default class Show extends BaseCommand<typeof Show> {
  static override summary = "List the account's service principals (GET /settings/service-principals).";
  static override description = `Identity-provider applications registered for the account: names and client ids, never secrets. --json prints {service_principals, updated_at}. ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings service-principals show', '<%= config.bin %> settings service-principals show --json'];

  async run(): Promise<ServicePrincipalsSetting> {
    const setting = await this.client().settings.getServicePrincipals();
    const list = setting.service_principals;
    this.print(list.length > 0 ? table(list, servicePrincipalColumns) : Messages.empty);
    return setting;
  }
}

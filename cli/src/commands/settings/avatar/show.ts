import type { AvatarSetting } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { record } from '../../../output.js';
import { CONSOLE_ONLY } from '../../../resources/settings.js';

export default class Show extends BaseCommand<typeof Show> {
  static override summary = 'Show your avatar URL (GET /settings/avatar).';
  static override description = `url is null when you have none. ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings avatar show'];

  async run(): Promise<AvatarSetting> {
    const avatar = await this.client().settings.getAvatar();
    this.print(record(avatar));
    return avatar;
  }
}

import { Flags } from '@oclif/core';
import type { AvatarSetting } from '@xfer/shared';
import { BaseCommand, usageError } from '../../../base-command.js';
import { Messages } from '../../../messages.js';
import { record } from '../../../output.js';
import { CONSOLE_ONLY } from '../../../resources/settings.js';

export default class Update extends BaseCommand<typeof Update> {
  static override summary = 'Set or remove your avatar (PUT /settings/avatar).';
  static override description = `--avatar-url takes an https:// URL (anything else is exit code 2); --clear removes the avatar. ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings avatar update --avatar-url https://example.com/me.png', '<%= config.bin %> settings avatar update --clear'];
  static override flags = {
    // Not --url: that global flag is the API's own URL.
    'avatar-url': Flags.string({ description: 'https:// URL of the image', exclusive: ['clear'] }),
    clear: Flags.boolean({ description: 'Remove the avatar', exclusive: ['avatar-url'] }),
  };

  async run(): Promise<AvatarSetting> {
    const { 'avatar-url': url, clear } = this.flags;
    if (url === undefined && !clear) throw usageError(Messages.avatarUrlOrClear);
    const avatar = await this.client().settings.updateAvatar({ url: url ?? null });
    this.print(record(avatar));
    return avatar;
  }
}

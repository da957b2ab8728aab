import type { NotificationSettings } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { record } from '../../../output.js';
import { flatSettings, mergedSettings, settingsFlags } from '../../../resources/notifications.js';

export default class Set extends BaseCommand<typeof Set> {
  static override summary = "Change the account's notification settings (GET /notifications/settings, PUT /notifications/settings).";
  static override description = `Only what the flags name changes: the current settings are read and written back with those changes. --recipient and --event replace their lists.
The SMTP password is read from stdin (--smtp-password-stdin), never from the command line; it is kept while the host and username stay, and must be piped again when either changes.
A refused host (a private address), an unknown event or a bad address is exit code 2 with the server's reason.`;
  static override examples = [
    'printf %s "$SMTP_PASSWORD" | <%= config.bin %> notifications settings set --enable --smtp-host smtp.example.com --smtp-port 587 --smtp-tls starttls --smtp-username xfer --smtp-password-stdin --from xfer@example.com --recipient ops@example.com --event transfer.failed',
    '<%= config.bin %> notifications settings set --event transfer.failed --event workflow.failed',
    '<%= config.bin %> notifications settings set --no-enable',
  ];
  static override flags = settingsFlags;

  async run(): Promise<NotificationSettings> {
    const api = this.client().notifications;
    const body = await mergedSettings(await api.settings(), this.flags);
    const settings = await api.updateSettings(body);
    this.print(record(flatSettings(settings)));
    return settings;
  }
}

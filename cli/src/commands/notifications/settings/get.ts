import type { NotificationSettings } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { record } from '../../../output.js';
import { flatSettings } from '../../../resources/notifications.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = "Show the account's notification settings (GET /notifications/settings).";
  static override description = `Whether event emails are on, to whom, through which SMTP server, for which events. The SMTP password is never shown: smtp_password says whether one is set. --json has the API's shape (email.smtp.has_password).`;
  static override examples = ['<%= config.bin %> notifications settings get', '<%= config.bin %> notifications settings get --json | jq .email.recipients'];

  async run(): Promise<NotificationSettings> {
    const settings = await this.client().notifications.settings();
    this.print(record(flatSettings(settings)));
    return settings;
  }
}

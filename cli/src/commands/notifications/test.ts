import type { NotificationTestResult } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';

export default class Test extends BaseCommand<typeof Test> {
  static override summary = 'Send a test email to the recipients now (POST /notifications/test).';
  static override description = `One attempt with the stored settings, made while you wait; prints success, the SMTP server's error (never a credential) and the log_id (see notifications log).
Like webhooks test, exit code 0 whatever the server answered (scripts read success from --json); 2 when email is not configured yet.`;
  static override examples = ['<%= config.bin %> notifications test', '<%= config.bin %> notifications test --json | jq -e .success'];

  async run(): Promise<NotificationTestResult> {
    const result = await this.client().notifications.test();
    this.print(record({ ...result }));
    return result;
  }
}

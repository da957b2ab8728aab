import type { WebhookTestResult } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { webhookIdArg } from '../../resources/webhooks.js';

export default class Test extends BaseCommand<typeof Test> {
  static override summary = 'Send a signed webhook.test event now (POST /webhooks/:id/test).';
  static override description = `One attempt, made while you wait; prints success, the receiver's status_code, duration_ms, error and the delivery_id (see webhooks deliveries).
Like connections test, exit code 0 whatever the receiver answered (scripts read success from --json); 4 when the id is unknown.`;
  static override examples = [
    '<%= config.bin %> webhooks test 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> webhooks test 665f1c2e9b1d4a0012345678 --json | jq -e .success',
  ];
  static override args = webhookIdArg;

  async run(): Promise<WebhookTestResult> {
    const result = await this.client().webhooks.test(this.args.id);
    this.print(record({ ...result }));
    return result;
  }
}

import type { PlanSetting } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { record } from '../../../output.js';
import { CONSOLE_ONLY } from '../../../resources/settings.js';

export default class Show extends BaseCommand<typeof Show> {
  static override summary = "Show the account's plan (GET /settings/plan).";
  static override description = `The plan (free, team or enterprise) and when an owner last changed it (updated_at, null while it is the bootstrapped one). API keys and webhooks need team or higher. ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings plan show', '<%= config.bin %> settings plan show --json | jq -r .plan'];

  async run(): Promise<PlanSetting> {
    const plan = await this.client().settings.getPlan();
    this.print(record(plan));
    return plan;
  }
}

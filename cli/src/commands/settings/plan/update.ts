import { Flags } from '@oclif/core';
import { PLANS, type Plan, type PlanSetting } from '@xfer/shared';
import { BaseCommand } from '../../../base-command.js';
import { record } from '../../../output.js';
import { CONSOLE_ONLY } from '../../../resources/settings.js';

export default class Update extends BaseCommand<typeof Update> {
  static override summary = "Change the account's plan (PUT /settings/plan).";
  static override description = `Owners only (exit code 3 otherwise); in force from the next request: API keys and webhooks need team or higher. Going to free while the account has API keys (besides the bootstrap key) or webhooks is refused (exit code 5, the message counts them): revoke and delete them first. ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings plan update --plan team', '<%= config.bin %> settings plan update --plan free --json'];
  static override flags = {
    plan: Flags.string({ description: 'The new plan', options: [...PLANS], required: true }),
  };

  async run(): Promise<PlanSetting> {
    const plan = await this.client().settings.updatePlan({ plan: this.flags.plan as Plan });
    this.print(record(plan));
    return plan;
  }
}

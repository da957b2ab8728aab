import type { TestStatus } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { CONSOLE_ONLY } from '../../resources/settings.js';

export default class TestStatusCommand extends BaseCommand<typeof TestStatusCommand> {
  static override summary = "Check the account's control plane and database (GET /settings/test-status).";
  static override description = `Prints status (ok or degraded), database (ok or unavailable), database_latency_ms and checked_at. Exit code 0 for both outcomes (scripts read status from --json); for a check without credentials use xfer health. ${CONSOLE_ONLY}`;
  static override examples = ['<%= config.bin %> settings test-status', '<%= config.bin %> settings test-status --json | jq -e \'.status == "ok"\''];

  async run(): Promise<TestStatus> {
    const status = await this.client().settings.testStatus();
    this.print(record(status));
    return status;
  }
}

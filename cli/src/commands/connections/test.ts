import { BaseCommand } from '../../base-command.js';
import type { TestResult } from '@xfer/shared';
import { record } from '../../output.js';
import { connectionIdArg } from '../../resources/connections.js';

export default class Test extends BaseCommand<typeof Test> {
  static override summary = 'Check that an agent can reach a connection (POST /connections/:id/test).';
  static override description = 'Prints success, message and latency_ms. Exit code 0 whatever the outcome (scripts read success from --json); 6 when no agent can run the test.';
  static override examples = ['<%= config.bin %> connections test 665f1c2e9b1d4a0012345678', '<%= config.bin %> connections test 665f1c2e9b1d4a0012345678 --json | jq -e .success'];
  static override args = connectionIdArg;

  async run(): Promise<TestResult> {
    const result = await this.client().connections.test(this.args.id);
    this.print(record({ ...result }));
    return result;
  }
}

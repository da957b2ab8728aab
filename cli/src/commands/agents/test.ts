import type { TestResult } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { agentIdArg } from '../../resources/agents.js';

export default class Test extends BaseCommand<typeof Test> {
  static override summary = 'Ping an agent through its connection (POST /agents/:id/test).';
  static override description = `Prints success, message and latency_ms. Like connections test: exit code 0 when the agent answered, whatever it said (scripts read success from --json); 6 when the agent is offline (the API answers 503, retried first); 4 when the id is unknown.`;
  static override examples = ['<%= config.bin %> agents test 665f1c2e9b1d4a0012345678', '<%= config.bin %> agents test 665f1c2e9b1d4a0012345678 --json | jq .latency_ms'];
  static override args = agentIdArg;

  async run(): Promise<TestResult> {
    const result = await this.client().agents.test(this.args.id);
    this.print(record({ ...result }));
    return result;
  }
}

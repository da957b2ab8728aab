import type { Agent } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { agentIdArg } from '../../resources/agents.js';

export default class Get extends BaseCommand<typeof Get> {
  static override summary = 'Show an agent (GET /agents/:id).';
  static override description = 'Status, last contact, version, host name, connector types and running jobs. The token is never shown again. Exit code 4 when the id is unknown.';
  static override examples = ['<%= config.bin %> agents get 665f1c2e9b1d4a0012345678', '<%= config.bin %> agents get 665f1c2e9b1d4a0012345678 --json | jq -r .status'];
  static override args = agentIdArg;

  async run(): Promise<Agent> {
    const agent = await this.client().agents.get(this.args.id);
    this.print(record(agent));
    return agent;
  }
}

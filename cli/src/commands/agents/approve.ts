import type { Agent } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';
import { agentIdArg } from '../../resources/agents.js';

export default class Approve extends BaseCommand<typeof Approve> {
  static override summary = 'Approve a pending agent (POST /agents/:id/approve).';
  static override description = `A pending agent (created by a key without every scope, or a member's session) serves only the connections pinned to it by agent_id. Once approved it also serves its pools and the connections that name no agent, and receives their credentials. Needs an administrator: an owner or admin session, or a key holding every scope (exit code 3 otherwise). Approving an approved agent changes nothing. To withdraw approval, revoke the agent (agents delete). Exit code 4 when the id is unknown.`;
  static override examples = ['<%= config.bin %> agents approve 665f1c2e9b1d4a0012345678', '<%= config.bin %> agents approve 665f1c2e9b1d4a0012345678 --json | jq .approved'];
  static override args = agentIdArg;

  async run(): Promise<Agent> {
    const agent = await this.client().agents.approve(this.args.id);
    this.print(record(agent));
    return agent;
  }
}

import { Flags } from '@oclif/core';
import type { CreatedAgent } from '@xfer/shared';
import { BaseCommand } from '../../base-command.js';
import { record } from '../../output.js';

export default class Create extends BaseCommand<typeof Create> {
  static override summary = 'Register an agent (POST /agents).';
  static override description = `The answer carries the agent's token (agt_…, for XFER_AGENT_TOKEN of xfer-agent): it is shown this once, and a warning saying so goes to stderr. With --json, the agent with its token.`;
  static override examples = [
    '<%= config.bin %> agents create --name dc-fra1 --label eu-west --label dc=fra1',
    '<%= config.bin %> agents create --name dc-fra1 --json | jq -r .token',
  ];
  static override flags = {
    name: Flags.string({ description: 'Display name', required: true }),
    label: Flags.string({ description: 'Label to tell agents apart, e.g. eu-west or dc=fra1 (repeat for several)', multiple: true }),
  };

  async run(): Promise<CreatedAgent> {
    const { name, label } = this.flags;
    const { data: agent, warning } = await this.client().agents.create({ name, ...(label && { labels: label }) });
    this.print(record(agent));
    if (warning) this.note(warning);
    return agent;
  }
}

import { Flags } from '@oclif/core';
import type { Agent, UpdateAgentRequest } from '@xfer/shared';
import { BaseCommand, usageError } from '../../base-command.js';
import { Messages } from '../../messages.js';
import { record } from '../../output.js';
import { agentIdArg } from '../../resources/agents.js';

export default class Update extends BaseCommand<typeof Update> {
  static override summary = 'Change an agent (PUT /agents/:id).';
  static override description = `Only the fields given change. --label replaces the labels the account gives the agent (repeat for several; --clear-labels removes them all); the labels its operator gave it (xfer-agent start --label) stay, and together they are the pools it serves (a connection's agent_pool). --max-jobs caps the jobs it runs at once below its own --max-jobs (--clear-max-jobs removes the cap); a lowered cap lets running jobs finish.
Exit code 5 when the name is taken; 4 when the id is unknown.`;
  static override examples = [
    '<%= config.bin %> agents update 665f1c2e9b1d4a0012345678 --max-jobs 2',
    '<%= config.bin %> agents update 665f1c2e9b1d4a0012345678 --label eu-west --label dc=fra1',
    '<%= config.bin %> agents update 665f1c2e9b1d4a0012345678 --name dc-fra1-b --clear-max-jobs --json | jq .slots',
  ];
  static override args = agentIdArg;
  static override flags = {
    name: Flags.string({ description: 'New display name (unique in the account)' }),
    label: Flags.string({ description: 'Label (pool) the account gives the agent; replaces the current ones (repeat for several)', multiple: true, exclusive: ['clear-labels'] }),
    'clear-labels': Flags.boolean({ description: 'Remove every label the account gave the agent' }),
    'max-jobs': Flags.integer({ description: 'Jobs the agent runs at once, at most (1-1000; bounded by its own --max-jobs)', min: 1, max: 1000, exclusive: ['clear-max-jobs'] }),
    'clear-max-jobs': Flags.boolean({ description: "Remove the cap: the agent's own --max-jobs alone" }),
  };

  async run(): Promise<Agent> {
    const f = this.flags;
    const body: UpdateAgentRequest = {
      ...(f.name !== undefined && { name: f.name }),
      ...(f.label !== undefined && { labels: [...new Set(f.label)] }),
      ...(f['clear-labels'] && { labels: [] }),
      ...(f['max-jobs'] !== undefined && { max_jobs: f['max-jobs'] }),
      ...(f['clear-max-jobs'] && { max_jobs: null }),
    };
    if (Object.keys(body).length === 0) throw usageError(Messages.nothingToUpdate);
    const agent = await this.client().agents.update(this.args.id, body);
    this.print(record(agent));
    return agent;
  }
}

import { Flags } from '@oclif/core';
import type { Transfer } from '@xfer/shared';
import { progressFlags } from '../../progress/index.js';
import { FollowCommand, transferIdArg } from '../../resources/transfers.js';

export default class Execute extends FollowCommand<typeof Execute> {
  static override summary = 'Start a queued transfer job and follow it to its end (POST /transfers/:id/execute, GET /transfers/:id, POST /transfers/:id/cancel).';
  static override description = `Following, output, Ctrl-C and exit codes as in "transfers run": 0 completed, 7 failed or cancelled (the final job still on stdout), 6 when the server could not be reached while following (the job carries on).
The job waits in its account's queue until an agent that may run it has a free slot (its queue_position shows where it stands). --no-wait only puts it in the queue and prints it.
--plan applies exactly a plan made with "transfers plan" (a file changed since is left and reported "changed since plan").
Exit code 5 when the job is not queued (a failed or cancelled one needs "transfers retry" first), or the plan is not this job's, not ready, or the job changed since; 4 when the plan is unknown or expired; 6 when no agent is online to run it.`;
  static override examples = [
    '<%= config.bin %> transfers execute 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> transfers execute 665f1c2e9b1d4a0012345678 --no-wait',
    '<%= config.bin %> transfers execute 665f1c2e9b1d4a0012345678 --plan 665f1c2e9b1d4a00aaaaaaaa',
  ];
  static override args = transferIdArg;
  static override flags = {
    ...progressFlags,
    wait: Flags.boolean({ description: 'Follow the job to its end; --no-wait prints it once queued', default: true, allowNo: true }),
    plan: Flags.string({ description: 'Apply exactly this plan of the job ("transfers plan" makes one)' }),
  };

  async run(): Promise<Transfer> {
    const client = this.client();
    const { plan } = this.flags;
    const started = plan ? await client.transfers.startPlan(this.args.id, plan) : await client.transfers.start(this.args.id);
    return this.flags.wait ? this.followToEnd(client, started, true) : this.started(started);
  }
}

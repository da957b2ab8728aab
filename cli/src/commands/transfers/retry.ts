import { Flags } from '@oclif/core';
import type { Transfer } from '@xfer/shared';
import { record } from '../../output.js';
import { progressFlags } from '../../progress/index.js';
import { FollowCommand, transferIdArg } from '../../resources/transfers.js';

export default class Retry extends FollowCommand<typeof Retry> {
  static override summary = 'Queue a failed or cancelled transfer job again (POST /transfers/:id/retry, POST /transfers/:id/execute, GET /transfers/:id, POST /transfers/:id/cancel).';
  static override description = `The job goes back to queued as its next attempt; its run skips files already at the destination. Without --run it only queues it (start it with "transfers execute").
--run also starts it and follows it to its end, as "transfers execute" does (exit 0 completed, 7 failed or cancelled).
Exit code 5 when the job is not failed or cancelled, 4 when the id is unknown.`;
  static override examples = [
    '<%= config.bin %> transfers retry 665f1c2e9b1d4a0012345678',
    '<%= config.bin %> transfers retry 665f1c2e9b1d4a0012345678 --run',
  ];
  static override args = transferIdArg;
  static override flags = {
    ...progressFlags,
    run: Flags.boolean({ description: 'Start the new attempt and follow it to its end' }),
  };

  async run(): Promise<Transfer> {
    const client = this.client();
    const queued = await client.transfers.retry(this.args.id);
    if (!this.flags.run) {
      this.print(record(queued));
      return queued;
    }
    return this.followToEnd(client, await client.transfers.start(queued.id), true);
  }
}

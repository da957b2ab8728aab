import { Flags } from '@oclif/core';
import type { Transfer } from '@xfer/shared';
import { progressFlags } from '../../progress/index.js';
import { createRequest, FollowCommand, transferSpecFlags } from '../../resources/transfers.js';

export default class Run extends FollowCommand<typeof Run> {
  static override summary = 'Create a transfer job, start it and follow it to its end (GET /connections, POST /transfers, POST /transfers/:id/execute, GET /transfers/:id, POST /transfers/:id/cancel).';
  static override description = `Progress goes to stderr: a live view on a terminal, a line every 5 s otherwise (XFER_PROGRESS_INTERVAL_MS changes it), none with --quiet or with --json in a pipe. stdout gets the final job (with --json, the Transfer object), also when it failed.
Exit code 0 when the job completed; 7 when it failed or was cancelled, with the job's error as the one stderr line.
Ctrl-C cancels the job on the server and waits until it reports cancelled (exit 7); a second Ctrl-C stops waiting at once (exit 130).
If the server cannot be reached while following (after retries), exit 6: the job carries on, "transfers watch <id>" picks it up again.
--source and --dest take a connection's id or name, as in "transfers create".`;
  static override examples = [
    '<%= config.bin %> transfers run --name nightly --source nas --source-path /exports --dest backups --dest-path /nightly',
    '<%= config.bin %> transfers run --source nas --source-path /in --dest backups --dest-path / --concurrency 16 --json > job.json',
    '<%= config.bin %> transfers run --source nas --source-path /in --dest backups --dest-path / --no-wait --json | jq -r .id',
  ];
  static override flags = {
    ...transferSpecFlags,
    ...progressFlags,
    wait: Flags.boolean({ description: 'Follow the job to its end; --no-wait prints it once started', default: true, allowNo: true }),
  };

  async run(): Promise<Transfer> {
    const client = this.client();
    const created = await client.transfers.create(await createRequest(client, this.flags));
    const started = await client.transfers.start(created.id);
    return this.flags.wait ? this.followToEnd(client, started, true) : this.started(started);
  }
}

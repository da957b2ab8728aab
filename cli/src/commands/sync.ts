import { Args, Flags } from '@oclif/core';
import type { Transfer } from '@xfer/shared';
import { usageError } from '../base-command.js';
import { Messages } from '../messages.js';
import { progressFlags } from '../progress/index.js';
import { planFailed, printPlan } from '../resources/plans.js';
import { filterFlags, limitFlags, syncOptions } from '../resources/sync-options.js';
import { connectionId, FollowCommand } from '../resources/transfers.js';

/** `CONNECTION:PATH`: the connection's name or id before the first colon, the path after it (a leading / added when left out). */
export function parseRemote(text: string): { connection: string; path: string } {
  const at = text.indexOf(':');
  if (at <= 0) throw usageError(Messages.badRemote(text));
  const path = text.slice(at + 1);
  return { connection: text.slice(0, at), path: path.startsWith('/') ? path : `/${path}` };
}

export default class Sync extends FollowCommand<typeof Sync> {
  static override summary = 'Make a destination match a source, rclone style: create a sync transfer, plan it, print the plan, then apply exactly that plan (GET /connections, POST /transfers, POST /transfers/:id/plan, GET /transfers/:id/plan/items, POST /transfers/:id/execute, GET /transfers/:id).';
  static override description = `SRC and DST are CONNECTION:PATH, the connection by name or id (as "transfers create" takes them): nas:/exports backups:/nightly.
The transfer is made with mode sync: new and changed files are copied, then destination files the (filtered) source does not have are deleted, only once every copy of the run is verified, and never past --max-delete. The plan is printed first (ACTION, PATH, SIZE, REASON, then the summary).
--dry-run stops there (exit 0): nothing is changed, and the transfer and its plan are kept, so "transfers execute <id> --plan <plan id>" can apply it later. Otherwise exactly that plan is applied, with the progress, output and exit codes of "transfers run" (0 completed, 7 failed or cancelled).
--include/--exclude/--filter are rclone's rules, in the order given (the first match decides; any --include leaves out what no include names); sizes and durations take rclone's units.
With --json: --dry-run prints {transfer, plan, items}; a run prints the final transfer, as "transfers run --json".`;
  static override examples = [
    '<%= config.bin %> sync nas:/exports backups:/nightly --dry-run',
    '<%= config.bin %> sync nas:/exports backups:/nightly --exclude "*.tmp" --exclude "cache/" --max-delete 10%',
    '<%= config.bin %> sync nas:/photos s3-archive:/photos --include "*.jpg" --bwlimit 10M --window 22:00-06:00',
    '<%= config.bin %> sync nas:/exports backups:/nightly --dry-run --json | jq .plan.summary',
  ];
  static override args = {
    src: Args.string({ description: 'Source, CONNECTION:PATH', required: true }),
    dst: Args.string({ description: 'Destination, CONNECTION:PATH', required: true }),
  };
  static override flags = {
    'dry-run': Flags.boolean({ description: 'Print the plan and stop: nothing is changed' }),
    name: Flags.string({ description: 'Name of the transfer (default: "sync SRC -> DST")' }),
    ...filterFlags,
    ...limitFlags,
    ...progressFlags,
  };

  async run(): Promise<Transfer | undefined> {
    const { src, dst } = this.args;
    const source = parseRemote(src);
    const destination = parseRemote(dst);
    const options = { ...syncOptions(this.flags, this.argv), mode: 'sync' as const };
    const client = this.client();
    const [sourceConnectionId, destinationConnectionId] = await Promise.all([connectionId(client, source.connection), connectionId(client, destination.connection)]);
    const transfer = await client.transfers.create({
      name: this.flags.name ?? `sync ${src} -> ${dst}`.slice(0, 200),
      sourceConnectionId, sourcePath: source.path, destinationConnectionId, destinationPath: destination.path, options,
    });
    const plan = await client.transfers.plan(transfer.id);
    const json = this.jsonEnabled();
    const dryRun = this.flags['dry-run'];
    // With --json, the plan is the output of a dry run only: a run's is the final transfer.
    if (!json || dryRun) await printPlan(client, plan, { json, stdout: process.stdout, ...(dryRun ? { extra: { transfer } } : {}) });
    else if (plan.status === 'failed') throw planFailed(plan);
    if (dryRun) {
      this.note(Messages.planKept(transfer.id, plan.id, plan.expires_at));
      return undefined;
    }
    const started = await client.transfers.startPlan(transfer.id, plan.id);
    return this.followToEnd(client, started, true);
  }
}
